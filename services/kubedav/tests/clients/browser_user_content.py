"""Headless Chromium (Debian's, through chromium-driver) opens files that another user
uploaded, run by tests/clients.rs with the URL of the collection holding them and a
directory for screenshots. Each file carries script that, if it ran, would retitle the
page and write a file next to itself with a synchronous PUT, as a real attack would use
the reader's cached credentials. The browser must show each file and run none of it.

Prints one line per file, `<name>: title=<title>`, then `user content ok`; any failure
raises. Whether a PUT arrived is the Rust side's to check, on the server."""

import sys

from headless import chromium
from selenium.webdriver.support.ui import WebDriverWait

url, shots = sys.argv[1], sys.argv[2]
files = sys.argv[3:]

driver = chromium()
wait = WebDriverWait(driver, 30)
ran = []
try:
    for name in files:
        driver.get(url + name)
        # The load event comes after every synchronous script and request of the page.
        wait.until(lambda d: d.execute_script("return document.readyState") == "complete")
        title = driver.title
        driver.save_screenshot(f"{shots}/user-content-{name}.png")
        print(f"{name}: title={title}")
        if title == "script ran":
            ran.append(name)
finally:
    driver.quit()
if ran:
    raise AssertionError(f"scripts ran in the server's origin: {ran}")
print("user content ok")
