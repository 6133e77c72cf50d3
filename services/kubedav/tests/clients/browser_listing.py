"""Headless Chromium (Debian's, through chromium-driver) on kubedav's file manager, run by
tests/clients.rs with the collection's URL, a directory for screenshots and the path of
a 50 MiB file to upload. It does what a user does and checks what a user sees:

* a member named like an HTML injection shows as its text and creates no element;
* sorting by size reorders the rows; a link opens its file; a Markdown preview renders;
* an upload through the file picker shows its progress bar moving, then the file;
* a new folder, a rename and a delete (with its confirmation) show in the listing;
* the browser logs no Content Security Policy violation.

Any failure raises."""

import os
import sys
import time

from headless import chromium
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

url, shots, big = sys.argv[1], sys.argv[2], sys.argv[3]
hostile = "<img src=x onerror=alert(1)>.html"

driver = chromium(size="1100,800", console_log=True)
# The page reloads after each change: an element found before can go stale under a wait.
wait = WebDriverWait(driver, 30, ignored_exceptions=[StaleElementReferenceException])


def names():
    # One script call reads them all from one page, even while it reloads.
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('tr[data-name]')).map((r) => r.dataset.name);"
    ) or []


def row_button(name, action):
    for row in driver.find_elements(By.CSS_SELECTOR, "tr[data-name]"):
        if row.get_attribute("data-name") == name:
            return row.find_element(By.CSS_SELECTOR, f"button[data-action={action}]")
    raise AssertionError(f"no row {name!r} in {names()}")


def answer_prompt(text=None):
    wait.until(lambda d: _alert(d))
    alert = driver.switch_to.alert
    if text is not None:
        alert.send_keys(text)
    alert.accept()


def _alert(d):
    try:
        d.switch_to.alert
        return True
    except Exception:
        return False


def reloaded_with(predicate):
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete" and predicate())


try:
    driver.get(url)
    shown = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "td a")]
    assert hostile in shown, f"the hostile name is not shown as text: {shown}"
    images = driver.find_elements(By.TAG_NAME, "img")
    assert not images, f"a name became an element: {[i.get_attribute('outerHTML') for i in images]}"
    assert not _alert(driver), "a script ran"

    # Sorting: by size, descending on the second click.
    header = driver.find_element(By.CSS_SELECTOR, "th[data-key=size]")
    header.click()
    header.click()
    files = [n for n in names() if n in ("small.txt", "notes.md")]
    assert files[0] == "small.txt", f"descending by size: {names()}"

    # Markdown preview.
    row_button("notes.md", "preview").click()
    wait.until(lambda d: d.find_element(By.ID, "preview").is_displayed())
    heading = driver.find_element(By.CSS_SELECTOR, "#preview h3").text
    assert heading == "read me", heading

    # Upload through the picker, slowed to 20 MiB/s so the bar is seen moving.
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": 20 * 1024 * 1024},
    )
    driver.find_element(By.ID, "files").send_keys(big)
    seen = set()
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            value = driver.execute_script(
                "const p = document.querySelector('progress.file'); return p ? [p.value, p.max] : null;"
            )
        except Exception:
            break  # the page reloaded: the upload is done
        if value is None:
            if "big.bin" in names():
                break
            continue
        seen.add(value[0])
        driver.save_screenshot(os.path.join(shots, "uploading.png")) if 0 < value[0] < value[1] and len(seen) == 3 else None
        time.sleep(0.05)
    moving = [v for v in seen if 0 < v < 50 * 1024 * 1024]
    assert len(moving) >= 2, f"the progress bar did not move: {sorted(seen)}"
    driver.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
    )
    reloaded_with(lambda: "big.bin" in names())

    # New folder, rename, delete.
    driver.find_element(By.ID, "mkdir").click()
    answer_prompt("new folder")
    reloaded_with(lambda: "new folder" in names())
    row_button("notes.md", "rename").click()
    answer_prompt("renamed.md")
    reloaded_with(lambda: "renamed.md" in names() and "notes.md" not in names())
    row_button("renamed.md", "delete").click()
    answer_prompt()
    reloaded_with(lambda: "renamed.md" not in names())
    driver.save_screenshot(os.path.join(shots, "listing.png"))

    # A link opens its file.
    driver.find_element(By.LINK_TEXT, "small.txt").click()
    assert "small file" in driver.page_source, driver.page_source[:300]

    log = driver.get_log("browser")
    violations = [entry["message"] for entry in log if "Content Security Policy" in entry["message"]]
    assert not violations, violations
finally:
    driver.quit()
print("browser file manager ok")
