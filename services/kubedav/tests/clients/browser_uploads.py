"""Headless Chromium on kubedav's file manager, run by tests/uploads.rs with the folder's
URL, a directory for screenshots and the path of a 48 MiB file. A large file goes up by
TUS and survives what people's uploads meet:

* the network drops for two seconds at a quarter of the way: the upload goes on by
  itself, from where it was;
* the page is reloaded at half way, and the same file picked again: its bar starts
  where the upload stood (marked as resumed), not at zero, and the file lands.

Any failure raises."""

import os
import sys
import time

from headless import chromium
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

url, shots, big = sys.argv[1], sys.argv[2], sys.argv[3]
size = os.path.getsize(big)
driver = chromium(size="1100,800", console_log=True)
wait = WebDriverWait(driver, 60, ignored_exceptions=[StaleElementReferenceException])


def throttle(offline=False, rate=6 * 1024 * 1024):
    driver.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": offline, "latency": 0, "downloadThroughput": -1, "uploadThroughput": rate},
    )


def bar():
    """The file's progress bar: [value, max, resumed], or None."""
    return driver.execute_script(
        "const p = document.querySelector('progress.file');"
        "return p ? [p.value, p.max, p.dataset.resumed === 'true'] : null;"
    )


def until(condition, what, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: {bar()}")


try:
    driver.get(url)
    wait.until(lambda d: d.find_element(By.ID, "listing"))
    assert driver.execute_script("return document.body.dataset.uploads"), "the page offers no TUS uploads"
    driver.execute_cdp_cmd("Network.enable", {})
    throttle()
    driver.find_element(By.ID, "files").send_keys(big)

    until(lambda: (b := bar()) and b[0] >= size / 4, "a quarter")
    throttle(offline=True)
    time.sleep(2)
    stalled = bar()[0]
    throttle()
    until(lambda: (b := bar()) and b[0] > stalled, "the upload to go on after the network came back")
    until(lambda: (b := bar()) and b[0] >= size / 2, "half way")
    driver.save_screenshot(os.path.join(shots, "tus-before-reload.png"))

    driver.refresh()
    wait.until(lambda d: d.find_element(By.ID, "listing"))
    throttle()
    driver.find_element(By.ID, "files").send_keys(big)
    first = until(lambda: bar(), "the bar after the reload")
    until(lambda: (b := bar()) and b[2], "the upload marked as resumed")
    resumed = until(lambda: (b := bar()) and b[0] > 0 and b, "the resumed bar to show progress")
    assert resumed[0] >= size / 4, f"the upload started over: {first} then {resumed}"
    driver.save_screenshot(os.path.join(shots, "tus-resumed.png"))
    throttle(rate=-1)
    wait.until(
        lambda d: "big.bin"
        in (d.execute_script("return Array.from(document.querySelectorAll('tr[data-name]')).map((r) => r.dataset.name);") or [])
    )
    driver.save_screenshot(os.path.join(shots, "tus-landed.png"))
    violations = [e for e in driver.get_log("browser") if "Content Security Policy" in e.get("message", "")]
    assert not violations, violations
    print("browser uploads ok")
finally:
    driver.quit()
