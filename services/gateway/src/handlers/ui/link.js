// The page a public link with a password shows first: the password goes to the link
// (POST, with X-Kubedav-Request, in a header so it is never part of a URL), which
// answers with a cookie for the link; then the page opens as the link's folder.
"use strict";
(function () {
  const form = document.getElementById("unlock");
  const status = document.getElementById("status");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    status.textContent = "";
    fetch(form.dataset.href, {
      method: "POST",
      headers: { "X-Kubedav-Request": "1", "X-Kubedav-Link-Password": form.elements.password.value },
      credentials: "same-origin",
    }).then((response) => {
      if (response.ok) {
        location.reload();
        return;
      }
      return response.text().then((text) => { status.textContent = text.trim() || "refused: " + response.status; });
    }, (error) => { status.textContent = error.message; });
  });
})();
