from setuptools import find_packages, setup

setup(
    name="tinyproj",
    version="1.0",
    packages=find_packages(),
    entry_points={"scrapy": ["settings = tinyproj.settings"]},
    zip_safe=True,
)
