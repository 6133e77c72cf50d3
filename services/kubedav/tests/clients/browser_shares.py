"""Headless Chromium shares a folder through the file manager and finds it as the one it
was shared with, run by tests/shares.rs with the server's URL, a directory for
screenshots, and the password every user has.

alice opens her home, presses "Share" on `project`, shares it with bob to read and write,
and sees it under "Shared by me"; she publishes a read link to it, whose URL is shown
once, and which opens the folder for a browser without credentials. bob opens `/`, presses "Shares", sees alice's folder
under "Shared with me", follows its link, and finds `plan.txt` there.

Prints what it saw, then `shares view ok`; any failure raises. Whether bob may write
there is the Rust side's to check, on the server."""

import base64
import sys

from headless import chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

url, shots, password = sys.argv[1:4]


def browser(user):
    """A Chromium sending `user`'s Basic credentials with every request, as the
    browser's own authentication cache would."""
    driver = chromium(size="1000,700")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})
    return driver


def opened(driver, path):
    driver.get(url + path)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")


def panel_items(driver, list_id):
    WebDriverWait(driver, 30).until(lambda d: not d.find_element(By.ID, "shares").get_attribute("hidden") is not None)
    return [li.text for li in driver.find_elements(By.CSS_SELECTOR, f"#{list_id} li")]


alice = browser("alice")
try:
    opened(alice, "/home/alice/")
    row = alice.find_element(By.CSS_SELECTOR, "#listing tr[data-name=project]")
    row.find_element(By.CSS_SELECTOR, "button[data-action=share]").click()
    form = alice.find_element(By.ID, "share-form")
    assert form.get_attribute("hidden") is None, "the share form did not open"
    assert alice.find_element(By.ID, "share-what").text == "/home/alice/project"
    form.find_element(By.NAME, "to").send_keys("user:bob")
    Select(form.find_element(By.NAME, "permission")).select_by_value("write")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(alice, 30).until(
        lambda d: any("user:bob" in li.text for li in d.find_elements(By.CSS_SELECTOR, "#shares-made li"))
    )
    made = panel_items(alice, "shares-made")
    alice.save_screenshot(f"{shots}/shares-made.png")
    print(f"alice shares: {made}")
    assert made == ["/home/alice/project with user:bob (write) Stop sharing"], made
    status = alice.find_element(By.ID, "status").text
    assert status == "", status
    # A public link to the same folder, to read: its URL is shown once.
    row = alice.find_element(By.CSS_SELECTOR, "#listing tr[data-name=project]")
    row.find_element(By.CSS_SELECTOR, "button[data-action=publish]").click()
    form = alice.find_element(By.ID, "link-form")
    Select(form.find_element(By.NAME, "permission")).select_by_value("read")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(alice, 30).until(lambda d: d.find_element(By.ID, "link-made").get_attribute("hidden") is None)
    link = alice.find_element(By.ID, "link-url").get_attribute("value")
    WebDriverWait(alice, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#links-made li button"))
    links = panel_items(alice, "links-made")
    alice.save_screenshot(f"{shots}/link-made.png")
    print(f"alice's links: {links}")
    assert link.startswith(url + "/.kubedav/s/") and link.endswith("/"), link
    assert links == ["/home/alice/project (read, 0 uses) Revoke"], links
finally:
    alice.quit()

anyone = chromium(size="1000,700")
try:
    anyone.get(link)
    WebDriverWait(anyone, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#listing tbody tr[data-name]"))
    names = [r.get_attribute("data-name") for r in anyone.find_elements(By.CSS_SELECTOR, "#listing tbody tr[data-name]")]
    print(f"anyone through the link: {names}")
    assert names == ["plan.txt"], names
finally:
    anyone.quit()

bob = browser("bob")
try:
    opened(bob, "/")
    bob.find_element(By.ID, "shares-open").click()
    WebDriverWait(bob, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#shares-received li a"))
    received = panel_items(bob, "shares-received")
    bob.save_screenshot(f"{shots}/shares-received.png")
    print(f"shared with bob: {received}")
    assert received == ["/home/alice/project from alice (write)"], received
    bob.find_element(By.CSS_SELECTOR, "#shares-received li a").click()
    WebDriverWait(bob, 30).until(lambda d: d.current_url == url + "/home/alice/project/")
    names = [r.get_attribute("data-name") for r in bob.find_elements(By.CSS_SELECTOR, "#listing tbody tr[data-name]")]
    bob.save_screenshot(f"{shots}/shares-opened.png")
    print(f"bob in /home/alice/project/: {names}")
    assert names == ["plan.txt"], names
    assert bob.find_element(By.ID, "toolbar").get_attribute("hidden") is None, "bob may write here"
    assert not bob.find_elements(By.CSS_SELECTOR, "button[data-action=share]"), "bob may not share it on"
finally:
    bob.quit()
print("shares view ok")
