"""Headless Chromium uses the file manager's trash and versions, run by tests/keep.rs
with the server's URL, a directory for screenshots, and alice's password.

alice opens her home: `report.txt` has two earlier versions; she opens its "Versions",
restores the oldest, and the page shows its size. She opens the "Trash", finds the
`notes.txt` she deleted, restores it (then also `draft.txt`, whose name is taken: she
agrees to replace it), and deletes `old.txt` for good.

Prints what it saw, then `keep view ok`; any failure raises. Whether the bytes came
back is the Rust side's to check, on the server."""

import base64
import sys

from headless import chromium
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

url, shots, password = sys.argv[1:4]

driver = chromium(size="1100,800")
token = base64.b64encode(f"alice:{password}".encode()).decode()
driver.execute_cdp_cmd("Network.enable", {})
driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})
# The panels are drawn again after each change: a row read while that happens is stale.
wait = WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,))


def opened(path):
    driver.get(url + path)
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")


def rows(table_id):
    return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in driver.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr")]


try:
    opened("/home/alice/")
    row = driver.find_element(By.CSS_SELECTOR, "#listing tr[data-name='report.txt']")
    row.find_element(By.CSS_SELECTOR, "button[data-action=versions]").click()
    wait.until(lambda d: d.find_element(By.ID, "versions").get_attribute("hidden") is None)
    versions = rows("versions-list")
    driver.save_screenshot(f"{shots}/versions.png")
    print(f"versions of report.txt: {versions}")
    assert driver.find_element(By.ID, "versions-of").text == "/home/alice/report.txt"
    assert [v[1] for v in versions] == ["16 B", "5 B"], versions
    # The oldest (listed last) becomes the content again.
    driver.find_elements(By.CSS_SELECTOR, "#versions-list tbody tr")[-1].find_element(By.TAG_NAME, "button").click()
    driver.switch_to.alert.accept()
    wait.until(lambda d: "restored a version" in d.find_element(By.ID, "status").text)
    wait.until(lambda d: len(rows("versions-list")) == 3)
    driver.find_element(By.ID, "versions-close").click()
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#listing tr[data-name='report.txt'] td.size").text == "5 B")

    driver.find_element(By.ID, "trash-open").click()
    wait.until(lambda d: d.find_element(By.ID, "trash").get_attribute("hidden") is None)
    items = rows("trash-items")
    driver.save_screenshot(f"{shots}/trash.png")
    print(f"trash: {items}")
    assert sorted(i[0] for i in items) == ["draft.txt", "notes.txt", "old.txt"], items
    assert all(i[1] == "/home/alice" for i in items), items

    def act(name, label):
        for tr in driver.find_elements(By.CSS_SELECTOR, "#trash-items tbody tr"):
            if tr.find_element(By.TAG_NAME, "td").text == name:
                next(b for b in tr.find_elements(By.TAG_NAME, "button") if b.text == label).click()
                return
        raise AssertionError(f"no {name} in the trash")

    act("notes.txt", "Restore")
    wait.until(lambda d: "restored /home/alice/notes.txt" in d.find_element(By.ID, "status").text)
    wait.until(lambda d: len(rows("trash-items")) == 2)
    act("draft.txt", "Restore")
    confirm = wait.until(expected_conditions.alert_is_present())
    print(f"asked: {confirm.text}")
    assert "exists. Replace it?" in confirm.text, confirm.text
    confirm.accept()
    wait.until(lambda d: "restored /home/alice/draft.txt" in d.find_element(By.ID, "status").text)
    wait.until(lambda d: [r[0] for r in rows("trash-items")] == ["old.txt"])
    act("old.txt", "Delete forever")
    driver.switch_to.alert.accept()
    wait.until(lambda d: rows("trash-items") == [["The trash is empty."]])
    driver.save_screenshot(f"{shots}/trash-emptied.png")
    driver.find_element(By.ID, "trash-close").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#listing tr[data-name='notes.txt']"))
    names = [r.get_attribute("data-name") for r in driver.find_elements(By.CSS_SELECTOR, "#listing tbody tr[data-name]")]
    print(f"alice's home: {names}")
    assert names == ["draft.txt", "notes.txt", "report.txt"], names
finally:
    driver.quit()
print("keep view ok")
