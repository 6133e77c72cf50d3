// kubedav's app passwords page: make one (shown once), revoke one. The page lists them
// without this script; every call carries X-Kubedav-Request, the proof kubedav's API asks
// of calls that change something. Names are put into the page as text only.
"use strict";
(function () {
  const api = document.body.dataset.api;
  const status = document.getElementById("status");
  const report = (message) => { status.textContent = message; };
  const call = (method, url, body) =>
    fetch(url, {
      method,
      credentials: "same-origin",
      headers: Object.assign({ "X-Kubedav-Request": "1" }, body ? { "Content-Type": "application/json" } : {}),
      body: body ? JSON.stringify(body) : undefined,
    }).then((response) => {
      if (response.ok) return response.status === 204 ? null : response.json();
      return response.json().then(
        (answer) => Promise.reject(new Error(answer.error || response.status)),
        () => Promise.reject(new Error("the server answered " + response.status)));
    });

  const cell = (row, text) => { const td = row.insertCell(); td.textContent = text; return td; };
  const addRow = (shown) => {
    const row = document.getElementById("app-passwords").tBodies[0].insertRow();
    row.dataset.id = shown.id;
    cell(row, shown.name);
    cell(row, shown.permission + (shown.path && shown.path !== "/" ? " " + shown.path : ""));
    cell(row, shown.created);
    cell(row, shown.last_used || "never");
    cell(row, shown.expires_at || "never");
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.action = "revoke";
    button.textContent = "Revoke";
    row.insertCell().appendChild(button);
    document.getElementById("none").hidden = true;
  };

  document.getElementById("create").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = event.target;
    const request = { name: form.elements.name.value, permission: form.elements.permission.value };
    if (form.elements.path.value.trim()) request.path = form.elements.path.value.trim();
    if (form.elements.expires.value) request.expires_at = form.elements.expires.value + "T23:59:59Z";
    call("POST", api, request).then((made) => {
      document.getElementById("secret").textContent = made.password;
      document.getElementById("secret-user").textContent = made.username;
      document.getElementById("created").hidden = false;
      addRow(made);
      form.reset();
      report("made " + made.name);
    }, (error) => report(error.message));
  });

  document.getElementById("app-passwords").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action=revoke]");
    if (!button) return;
    const row = button.closest("tr");
    const name = row.cells[0].textContent;
    if (!window.confirm("Revoke " + name + "? Clients using it stop working within a second.")) return;
    call("DELETE", api + "/" + encodeURIComponent(row.dataset.id)).then(() => {
      row.remove();
      report("revoked " + name);
    }, (error) => report(error.message));
  });
})();
