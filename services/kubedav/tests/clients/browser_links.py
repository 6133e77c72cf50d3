"""Headless Chromium opens a public link with a password, run by tests/links.rs with the
link's URL, a directory for screenshots, and the password.

The link first shows the page that asks for the password; a wrong one is refused on
the page; the right one opens the link's folder in the file manager, without the
owner's paths or any button that would change something; its file downloads.

Prints what it saw, then `link view ok`; any failure raises."""

import sys

from headless import chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

url, shots, password = sys.argv[1:4]

driver = chromium(size="1000,600")
wait = WebDriverWait(driver, 30)
try:
    driver.get(url)
    wait.until(lambda d: d.find_elements(By.ID, "unlock"))
    driver.save_screenshot(f"{shots}/link-password.png")
    print(f"asked: {driver.find_element(By.TAG_NAME, 'h1').text}")
    field = driver.find_element(By.NAME, "password")
    field.send_keys("not the password")
    driver.find_element(By.CSS_SELECTOR, "#unlock button[type=submit]").click()
    wait.until(lambda d: d.find_element(By.ID, "status").text != "")
    refused = driver.find_element(By.ID, "status").text
    print(f"wrong password: {refused}")
    assert "wrong password" in refused, refused
    field.clear()
    field.send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "#unlock button[type=submit]").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#listing tbody tr[data-name]"))
    names = [r.get_attribute("data-name") for r in driver.find_elements(By.CSS_SELECTOR, "#listing tbody tr[data-name]")]
    driver.save_screenshot(f"{shots}/link-opened.png")
    print(f"in the link: {names}")
    assert names == ["a.txt"], names
    page = driver.page_source
    assert "home/alice" not in page, "the owner's path shows"
    assert driver.find_element(By.ID, "toolbar").get_attribute("hidden") is not None, "a write toolbar"
    assert not driver.find_elements(By.ID, "account-link"), "an account link"
    driver.find_element(By.CSS_SELECTOR, "#listing tr[data-name='a.txt'] a").click()
    wait.until(lambda d: "public a" in d.find_element(By.TAG_NAME, "body").text)
    print("downloaded: " + driver.find_element(By.TAG_NAME, "body").text.strip())
finally:
    driver.quit()
print("link view ok")
