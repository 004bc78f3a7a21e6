# The project variant this egg was built from.
VERSION = "2.0"
