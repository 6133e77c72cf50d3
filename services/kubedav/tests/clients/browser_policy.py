"""Headless Chromium (Debian's, through chromium-driver) uses the file manager as one
user under an access policy, run by tests/clients.rs with the server's URL, a directory
for screenshots, the user and the password. The user's page of `/` must list only the
ways to what the policy grants, `/home/` only the user's own home, and a space the user
may only read must offer no write and turn files dropped on it into a readable error.

Prints what it saw, one `<page>: <names>` line each, then `policy view ok`; any failure
raises. Whether anything was written is the Rust side's to check, on the server."""

import base64
import sys

from headless import chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

url, shots, user, password = sys.argv[1:5]

driver = chromium()
wait = WebDriverWait(driver, 30)
# The user's credentials on every request of the page and of its script, as the
# browser's own Basic authentication cache would send them.
token = base64.b64encode(f"{user}:{password}".encode()).decode()
driver.execute_cdp_cmd("Network.enable", {})
driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})


def names(path):
    driver.get(url + path)
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")
    rows = driver.find_elements(By.CSS_SELECTOR, "#listing tbody tr[data-name]")
    return [row.get_attribute("data-name") for row in rows]


try:
    root = names("/")
    driver.save_screenshot(f"{shots}/policy-root.png")
    print(f"/: {root}")
    assert sorted(root) == ["home", "projects", "public"], root
    homes = names("/home/")
    print(f"/home/: {homes}")
    assert homes == [user], homes
    shared = names("/projects/apollo/")
    print(f"/projects/apollo/: {shared}")
    assert "plan.txt" in shared, shared
    assert driver.find_element(By.ID, "toolbar").get_attribute("hidden") is not None, "a write toolbar"
    assert not driver.find_elements(By.CSS_SELECTOR, "button[data-action=delete]"), "a delete button"
    # Files dropped on a space the user may only read.
    driver.execute_script(
        """
        const transfer = new DataTransfer();
        transfer.items.add(new File(["not allowed"], "graffiti.txt", {type: "text/plain"}));
        const drop = document.getElementById("drop");
        for (const type of ["dragover", "drop"]) {
          drop.dispatchEvent(new DragEvent(type, {dataTransfer: transfer, bubbles: true, cancelable: true}));
        }
        """
    )
    status = driver.find_element(By.ID, "status").text
    driver.save_screenshot(f"{shots}/policy-read-only.png")
    print(f"status: {status}")
    assert status.startswith("You may only read /projects/apollo/"), status
    assert driver.current_url == url + "/projects/apollo/", driver.current_url
finally:
    driver.quit()
print("policy view ok")
