"""A user's access token from the test OpenID provider (services/testkit/idp/idp.mjs),
got as a script gets one: the authorization code flow with PKCE for the public client
`cli`, signing in on the provider's login page. For the bench scripts; the Rust suites
have the same in kubedav_testkit::idp."""

import base64
import hashlib
import http.cookiejar
import json
import secrets
import urllib.error
import urllib.parse
import urllib.request

REDIRECT = "http://127.0.0.1/callback"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def token(issuer, login, password):
    """The access token (a JWT) of `login`."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), _NoRedirect)

    def call(url, data=None):
        try:
            response = opener.open(url, data=data)
            return response.status, response.headers, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    verifier = secrets.token_urlsafe(40)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urllib.parse.urlencode(dict(client_id="cli", response_type="code", redirect_uri=REDIRECT,
                                        scope="openid profile groups", state="s", code_challenge=challenge,
                                        code_challenge_method="S256"))
    status, headers, _ = call(f"{issuer}/auth?{query}")
    location = headers["location"]
    uid = location.rsplit("/", 1)[1]
    call(urllib.parse.urljoin(issuer, location))
    form = urllib.parse.urlencode(dict(login=login, password=password)).encode()
    status, headers, _ = call(f"{issuer}/interaction/{uid}/login", form)
    while status in (302, 303) and not headers["location"].startswith(REDIRECT):
        status, headers, _ = call(urllib.parse.urljoin(issuer, headers["location"]))
    code = urllib.parse.parse_qs(urllib.parse.urlparse(headers["location"]).query)["code"][0]
    body = urllib.parse.urlencode(dict(grant_type="authorization_code", code=code, redirect_uri=REDIRECT,
                                       client_id="cli", code_verifier=verifier)).encode()
    _, _, answer = call(f"{issuer}/token", body)
    return json.loads(answer)["access_token"]
