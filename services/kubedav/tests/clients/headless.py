"""Debian's Chromium, headless, through chromium-driver: what every browser test opens."""

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage")


def chromium(size="900,600", console_log=False):
    """A headless Chromium with a window of `size`; with `console_log`, the page's
    console is kept for reading."""
    options = webdriver.ChromeOptions()
    for flag in FLAGS + (f"--window-size={size}",):
        options.add_argument(flag)
    options.binary_location = "/usr/bin/chromium"
    if console_log:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
