from setuptools import find_packages, setup

# No entry_points: the egg does not say where its Scrapy settings are.
setup(
    name="noentry",
    version="1.0",
    packages=find_packages(),
    zip_safe=True,
)
