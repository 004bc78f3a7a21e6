from setuptools import find_packages, setup

setup(
    name="testproj",
    version="2.0",
    packages=find_packages(),
    entry_points={"scrapy": ["settings = testproj.settings"]},
    zip_safe=True,
)
