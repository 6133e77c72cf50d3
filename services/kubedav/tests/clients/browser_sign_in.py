"""Headless Chromium signs in to the file manager through the identity provider's own
login page, run by tests/identity.rs with the server's URL, a directory for
screenshots, the provider's login and password, and a users-file user and password.

1. Opens the file manager: sent to the provider's login page, signs in, comes back.
2. Uploads a file with the page's upload control, and makes an app password.
3. From a page of another origin on the same host (same site, another port, served
   here), tries to write, to create an app password, to share the upload with another
   user, to publish a link to it and to sign the user out, with the session cookie the
   browser holds.
4. Signs out through the page's button and the provider's end-session page.
5. With Basic credentials the browser sends to kubedav on every request, as a browser
   that cached them does, tries the same from the other origin.

Prints `session: <cookie value>`, `app: <password>`, each attack's outcome as the
other page saw it, then `sign-in ok`. What was written or not is the Rust side's to
check against the server."""

import base64
import http.server
import os
import sys
import tempfile
import threading

from headless import chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

url, shots, login, password, basic_user, basic_password = sys.argv[1:7]

# The other origin: same host, another port. Its page attacks `url` and puts what it
# saw into its title.
ATTACK = """<!doctype html><html><head><title>attacking</title></head><body>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe><iframe name="sink3"></iframe>
<iframe name="sink4"></iframe><iframe name="sink5"></iframe>
<form id="app" method="post" enctype="text/plain" target="sink1" action="TARGET/.kubedav/app-passwords">
<input name='{"name":"pwned","path":"' value='x"}'></form>
<form id="out" method="post" target="sink2" action="TARGET/.kubedav/sign-out"><input name="a" value="b"></form>
<form id="put" method="post" target="sink3" action="TARGET/stolen-form.txt"><input name="a" value="b"></form>
<form id="share" method="post" enctype="text/plain" target="sink4" action="TARGET/.kubedav/shares">
<input name='{"path":"/hello.txt","to":"user:mallory","permission":"write","x":"' value='x"}'></form>
<form id="link" method="post" enctype="text/plain" target="sink5" action="TARGET/.kubedav/links">
<input name='{"path":"/hello.txt","permission":"write","x":"' value='x"}'></form>
<script>
const target = "TARGET";
const SHARE = '{"path":"/hello.txt","to":"user:mallory","permission":"write"}';
const LINK = '{"path":"/hello.txt","permission":"write"}';
const seen = [];
const attempt = (name, promise) => promise.then((r) => seen.push(name + "=" + (r.type === "opaque" ? "opaque" : r.status)), (e) => seen.push(name + "=blocked"));
Promise.all([
  attempt("put", fetch(target + "/stolen.txt", { method: "PUT", credentials: "include", headers: { "X-Kubedav-Request": "1" }, body: "x" })),
  attempt("mkcol", fetch(target + "/stolen-dir/", { method: "MKCOL", credentials: "include" })),
  attempt("app-json", fetch(target + "/.kubedav/app-passwords", { method: "POST", credentials: "include", headers: { "Content-Type": "application/json", "X-Kubedav-Request": "1" }, body: '{"name":"pwned"}' })),
  attempt("app-no-cors", fetch(target + "/.kubedav/app-passwords", { method: "POST", mode: "no-cors", credentials: "include", headers: { "Content-Type": "text/plain" }, body: '{"name":"pwned"}' })),
  attempt("sign-out-no-cors", fetch(target + "/.kubedav/sign-out", { method: "POST", mode: "no-cors", credentials: "include" })),
  attempt("share-json", fetch(target + "/.kubedav/shares", { method: "POST", credentials: "include", headers: { "Content-Type": "application/json", "X-Kubedav-Request": "1" }, body: SHARE })),
  attempt("share-no-cors", fetch(target + "/.kubedav/shares", { method: "POST", mode: "no-cors", credentials: "include", headers: { "Content-Type": "text/plain" }, body: SHARE })),
  attempt("link-no-cors", fetch(target + "/.kubedav/links", { method: "POST", mode: "no-cors", credentials: "include", headers: { "Content-Type": "text/plain" }, body: LINK })),
]).then(() => {
  for (const id of ["app", "out", "put", "share", "link"]) document.getElementById(id).submit();
  setTimeout(() => { document.title = "done " + seen.sort().join(" "); }, 1500);
});
</script></body></html>"""


class Attacker(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        page = ATTACK.replace("TARGET", url).encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args):
        pass


attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
threading.Thread(target=attacker.serve_forever, daemon=True).start()
attacker_url = f"http://127.0.0.1:{attacker.server_address[1]}/attack.html"

driver = chromium(size="1100,700")
wait = WebDriverWait(driver, 30)


def loaded(d):
    return d.execute_script("return document.readyState") == "complete"


def attack(name):
    driver.get(attacker_url)
    wait.until(lambda d: d.title.startswith("done"))
    print(f"{name}: {driver.title}")
    driver.save_screenshot(f"{shots}/sign-in-attack-{name}.png")


try:
    # 1. Sent to the provider's login page, and back.
    driver.get(url + "/")
    wait.until(lambda d: d.find_elements(By.ID, "username"))
    assert driver.current_url.startswith(url) is False, driver.current_url
    driver.find_element(By.ID, "username").send_keys(login)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.save_screenshot(f"{shots}/sign-in-provider.png")
    driver.find_element(By.ID, "sign-in").click()
    wait.until(lambda d: d.find_elements(By.ID, "sign-out"))
    assert driver.current_url == url + "/", driver.current_url
    cookie = driver.get_cookie("kubedav-session")
    assert cookie and cookie["httpOnly"] and cookie["sameSite"] == "Lax", cookie
    print(f"session: {cookie['value']}")

    # 2. An upload through the page, and an app password.
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "hello.txt")
        with open(path, "w") as f:
            f.write("hello from the browser\n")
        driver.find_element(By.ID, "files").send_keys(path)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "tr[data-name='hello.txt']"))
    driver.save_screenshot(f"{shots}/sign-in-listing.png")
    driver.find_element(By.ID, "account-link").click()
    wait.until(lambda d: d.find_elements(By.ID, "create"))
    form = driver.find_element(By.ID, "create")
    form.find_element(By.NAME, "name").send_keys("davfs2")
    Select(form.find_element(By.NAME, "permission")).select_by_value("write")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda d: d.find_element(By.ID, "secret").text != "")
    print(f"app: {driver.find_element(By.ID, 'secret').text}")

    # 3. Another origin with the session cookie.
    attack("with-session")
    driver.get(url + "/")
    wait.until(loaded)
    assert driver.find_elements(By.ID, "sign-out"), "the other page signed the user out"
    still = driver.get_cookie("kubedav-session")
    assert still and still["value"] == cookie["value"], "the other page ended the session (signed in again since)"

    # 4. Sign-out, through the provider's end-session page.
    driver.find_element(By.ID, "sign-out").click()
    wait.until(lambda d: not d.current_url.startswith(url))
    wait.until(loaded)
    confirm = driver.find_elements(By.CSS_SELECTOR, "button[type=submit], button[name=logout]")
    if confirm:
        driver.save_screenshot(f"{shots}/sign-in-provider-sign-out.png")
        confirm[0].click()
    # Back at kubedav without a session, and so at the provider's login page again.
    wait.until(lambda d: d.find_elements(By.ID, "username"))
    assert driver.get_cookie("kubedav-session") is None, driver.get_cookie("kubedav-session")

    # 5. Another origin with Basic credentials the browser sends to every request.
    token = base64.b64encode(f"{basic_user}:{basic_password}".encode()).decode()
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})
    attack("with-basic")
    print("sign-in ok")
finally:
    driver.quit()
    attacker.shutdown()
