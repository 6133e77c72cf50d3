"""Headless Chromium (Debian's, through chromium-driver) manages app passwords in the file
manager, run by tests/app_passwords.rs with the server's URL, a directory for
screenshots, the user and the password. From the listing it follows "App passwords",
makes one that may write and one that may only read, reads each secret off the page,
revokes the second with its button, and keeps screenshots of the page with a secret
shown and of the list after the revocation.

Prints `write: <password>`, `read: <password>`, then `app passwords ok`; whether they
work is the Rust side's to check, with Basic, against the server."""

import base64
import sys

from headless import chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

url, shots, user, password = sys.argv[1:5]

driver = chromium(size="1100,700")
wait = WebDriverWait(driver, 30)
token = base64.b64encode(f"{user}:{password}".encode()).decode()
driver.execute_cdp_cmd("Network.enable", {})
driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})


def make(name, permission, folder):
    form = driver.find_element(By.ID, "create")
    form.find_element(By.NAME, "name").send_keys(name)
    Select(form.find_element(By.NAME, "permission")).select_by_value(permission)
    if folder:
        form.find_element(By.NAME, "path").send_keys(folder)
    before = driver.find_element(By.ID, "secret").text
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda d: d.find_element(By.ID, "secret").text not in ("", before))
    return driver.find_element(By.ID, "secret").text


try:
    driver.get(url + "/")
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")
    driver.find_element(By.ID, "account-link").click()
    wait.until(lambda d: d.find_elements(By.ID, "create"))
    assert "You have no app passwords yet." in driver.page_source
    writer = make("Laptop, davfs2", "write", "")
    print(f"write: {writer}")
    reader = make("Phone, read only", "read", "/docs")
    print(f"read: {reader}")
    driver.save_screenshot(f"{shots}/app-passwords-made.png")
    rows = driver.find_elements(By.CSS_SELECTOR, "#app-passwords tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows] == ["Laptop, davfs2", "Phone, read only"]
    assert writer not in driver.find_element(By.ID, "app-passwords").text, "a secret in the list"
    rows[1].find_element(By.CSS_SELECTOR, "button[data-action=revoke]").click()
    driver.switch_to.alert.accept()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#app-passwords tbody tr")) == 1)
    # What the server lists after a reload, not only what the page removed.
    driver.refresh()
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")
    rows = driver.find_elements(By.CSS_SELECTOR, "#app-passwords tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows] == ["Laptop, davfs2"], driver.page_source
    driver.save_screenshot(f"{shots}/app-passwords-list.png")
    print("app passwords ok")
finally:
    driver.quit()
