# The project variant this egg was built from (testproj_v2 overlays "2.0").
VERSION = "1.0"
