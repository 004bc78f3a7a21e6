from setuptools import find_packages, setup

setup(
    name="brokenproj",
    version="1.0",
    packages=find_packages(),
    entry_points={"scrapy": ["settings = brokenproj.settings"]},
    zip_safe=True,
)
