from setuptools import find_packages, setup

setup(
    name="testproj",
    version="1.0",
    packages=find_packages(),
    entry_points={"scrapy": ["settings = testproj.settings"]},
    zip_safe=True,
)
