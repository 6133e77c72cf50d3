"""Headless Chromium (Debian's, through chromium-driver) on kubedav's HTML listing, run by
tests/clients.rs with the listing's URL and a directory for screenshots. A member named
like an HTML injection must show as its text, run nothing and create no element; the
links must lead to the files; and the browser's log must hold no Content Security
Policy violation. Any failure raises."""

import os
import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

url, shots = sys.argv[1], sys.argv[2]
hostile = "<img src=x onerror=alert(1)>.html"

options = webdriver.ChromeOptions()
for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1000,700"):
    options.add_argument(flag)
options.binary_location = "/usr/bin/chromium"
options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
try:
    driver.get(url)
    names = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "td a")]
    assert hostile in names, f"the hostile name is not shown as text: {names}"
    assert "notes.md" in names, names
    images = driver.find_elements(By.TAG_NAME, "img")
    assert not images, f"a name became an element: {[i.get_attribute('outerHTML') for i in images]}"
    try:
        alert = driver.switch_to.alert
        raise AssertionError(f"a script ran: alert {alert.text!r}")
    except AssertionError:
        raise
    except Exception:
        pass
    driver.save_screenshot(os.path.join(shots, "listing.png"))
    link = driver.find_element(By.LINK_TEXT, "notes.md")
    link.click()
    assert "read me" in driver.page_source, driver.page_source[:500]
    log = driver.get_log("browser")
    violations = [entry["message"] for entry in log if "Content Security Policy" in entry["message"]]
    assert not violations, violations
finally:
    driver.quit()
print("browser listing ok")
