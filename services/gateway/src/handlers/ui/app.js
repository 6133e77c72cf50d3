// kubedav's file manager: sorting, uploads with progress, new folder, rename, delete,
// copy link, a Markdown preview, and shares (what was shared with the user, what it
// shared, and sharing what it manages), over the page the server rendered (which works
// without this script). Served from kubedav's own origin under a strict CSP: no inline
// code, and every name is put into the page as text, never as markup.
"use strict";
(function () {
  const body = document.body;
  const here = body.dataset.collection; // the collection's href, ending with "/"
  const writable = body.dataset.writable === "true";
  const table = document.getElementById("listing");
  const rows = () => Array.from(table.tBodies[0].rows).filter((r) => r.dataset.name !== undefined);

  // Sorting by name, size or date; collections stay first.
  table.tHead.addEventListener("click", (event) => {
    const th = event.target.closest("th[data-key]");
    if (!th) return;
    const key = th.dataset.key;
    const ascending = th.getAttribute("aria-sort") !== "ascending";
    for (const other of table.tHead.querySelectorAll("th")) other.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    const value = (row) => (key === "name" ? row.dataset.name.toLowerCase() : Number(row.dataset[key]));
    const sorted = rows().sort((a, b) => {
      const dirs = Number(b.dataset.dir) - Number(a.dataset.dir);
      if (dirs !== 0) return dirs;
      const x = value(a), y = value(b);
      return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
    });
    for (const row of sorted) table.tBodies[0].appendChild(row);
  });

  // Every change carries X-Kubedav-Request: with a session cookie, the server accepts
  // no write without it (a page of another origin cannot send it).
  const proof = { "X-Kubedav-Request": "1" };
  const send = (method, url, headers, payload) =>
    fetch(url, { method, headers: Object.assign({}, proof, headers || {}), body: payload, credentials: "same-origin" }).then((response) => {
      if (!response.ok) return response.text().then((text) => Promise.reject(new Error(method + " " + response.status + ": " + text)));
      return response;
    });
  const report = (error) => {
    const line = document.getElementById("status");
    line.textContent = error.message;
  };
  const segment = (name) => encodeURIComponent(name);

  // Row actions.
  table.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button) return;
    const row = button.closest("tr");
    const name = row.dataset.name;
    const href = row.querySelector("a").getAttribute("href");
    const action = button.dataset.action;
    if (action === "link") {
      const link = new URL(href, location.href).href;
      (navigator.clipboard ? navigator.clipboard.writeText(link) : Promise.reject(new Error("no clipboard")))
        .then(() => { document.getElementById("status").textContent = "copied " + link; })
        .catch(() => { window.prompt("Link", link); });
    } else if (action === "rename") {
      const next = window.prompt("Rename " + name + " to", name);
      if (!next || next === name || next.includes("/")) return;
      const destination = new URL(here + segment(next) + (row.dataset.dir === "1" ? "/" : ""), location.href).href;
      send("MOVE", href, { Destination: destination, Overwrite: "F" }).then(() => location.reload(), report);
    } else if (action === "delete") {
      if (!window.confirm("Delete " + name + "?")) return;
      send("DELETE", href).then(() => location.reload(), report);
    } else if (action === "share") {
      openShareForm(href);
    } else if (action === "publish") {
      openLinkForm(href);
    } else if (action === "versions") {
      showVersions(href, name);
    } else if (action === "preview") {
      fetch(href, { credentials: "same-origin" })
        .then((response) => response.text())
        .then((text) => showMarkdown(name, text), report);
    }
  });

  // A small Markdown renderer that builds DOM nodes from text: headings, paragraphs,
  // lists, fenced code, emphasis, inline code and http(s) links. No HTML is parsed.
  function showMarkdown(name, text) {
    const box = document.getElementById("preview");
    box.replaceChildren();
    const title = document.createElement("h2");
    title.textContent = name;
    box.appendChild(title);
    let list = null, code = null, paragraph = null;
    const inline = (parent, line) => {
      const pattern = /(\*\*[^*]+\*\*|\*[^*]+\*|`[^`]+`|\[[^\]]+\]\([^)\s]+\))/g;
      let last = 0, match;
      while ((match = pattern.exec(line))) {
        parent.appendChild(document.createTextNode(line.slice(last, match.index)));
        const token = match[0];
        let node;
        if (token.startsWith("**")) { node = document.createElement("strong"); node.textContent = token.slice(2, -2); }
        else if (token.startsWith("*")) { node = document.createElement("em"); node.textContent = token.slice(1, -1); }
        else if (token.startsWith("`")) { node = document.createElement("code"); node.textContent = token.slice(1, -1); }
        else {
          const [, label, target] = token.match(/^\[([^\]]+)\]\(([^)\s]+)\)$/);
          if (/^https?:\/\//i.test(target) || /^[^:]*$/.test(target)) {
            node = document.createElement("a"); node.href = target; node.textContent = label;
          } else node = document.createTextNode(label);
        }
        parent.appendChild(node);
        last = match.index + token.length;
      }
      parent.appendChild(document.createTextNode(line.slice(last)));
    };
    for (const line of text.split("\n")) {
      if (line.startsWith("```")) {
        if (code) { code = null; } else { const pre = document.createElement("pre"); code = document.createElement("code"); pre.appendChild(code); box.appendChild(pre); }
        list = paragraph = null;
        continue;
      }
      if (code) { code.textContent += line + "\n"; continue; }
      const heading = line.match(/^(#{1,6})\s+(.*)$/);
      const item = line.match(/^\s*[-*]\s+(.*)$/);
      if (heading) {
        const h = document.createElement("h" + Math.min(6, heading[1].length + 2));
        inline(h, heading[2]); box.appendChild(h); list = paragraph = null;
      } else if (item) {
        if (!list) { list = document.createElement("ul"); box.appendChild(list); }
        const li = document.createElement("li"); inline(li, item[1]); list.appendChild(li); paragraph = null;
      } else if (line.trim() === "") {
        list = paragraph = null;
      } else {
        if (!paragraph) { paragraph = document.createElement("p"); box.appendChild(paragraph); } else paragraph.appendChild(document.createTextNode(" "));
        inline(paragraph, line); list = null;
      }
    }
    box.hidden = false;
  }

  // Shares: the panel lists what was shared with the user (a link to each) and what it
  // shared (with a button to end each); the form shares a path the user manages.
  const base = body.dataset.base || "";
  const sharesOpen = document.getElementById("shares-open");
  const sharesApi = sharesOpen ? sharesOpen.dataset.href : null;
  const linksApi = sharesOpen ? sharesOpen.dataset.links : null;
  const item = (parts) => {
    const li = document.createElement("li");
    for (const part of parts) li.append(part);
    return li;
  };
  const link = (href, text) => {
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    return a;
  };
  const until = (share) => (share.expires_at ? ", until " + new Date(share.expires_at).toLocaleString() : "");
  function showShares() {
    fetch(sharesApi, { credentials: "same-origin" })
      .then((response) => response.ok ? response.json() : Promise.reject(new Error("shares: " + response.status)))
      .then((shares) => {
        const received = document.getElementById("shares-received");
        received.replaceChildren(...shares.received.map((share) =>
          item([link(share.href, share.path), " from " + share.creator + " (" + share.permission + until(share) + ")"])));
        if (!shares.received.length) received.append(item(["Nothing is shared with you."]));
        const made = document.getElementById("shares-made");
        made.replaceChildren(...shares.made.map((share) => {
          const end = document.createElement("button");
          end.type = "button";
          end.textContent = "Stop sharing";
          end.addEventListener("click", () =>
            send("DELETE", sharesApi + "/" + encodeURIComponent(share.id)).then(showShares, report));
          return item([link(share.href, share.path), " with " + share.to + " (" + share.permission + until(share) + ") ", end]);
        }));
        if (!shares.made.length) made.append(item(["You share nothing."]));
        document.getElementById("shares").hidden = false;
      }, report);
    fetch(linksApi, { credentials: "same-origin" })
      .then((response) => response.ok ? response.json() : Promise.reject(new Error("links: " + response.status)))
      .then((links) => {
        const list = document.getElementById("links-made");
        list.replaceChildren(...links.map((made) => {
          const end = document.createElement("button");
          end.type = "button";
          end.textContent = "Revoke";
          end.addEventListener("click", () =>
            send("DELETE", linksApi + "/" + encodeURIComponent(made.id)).then(showShares, report));
          const traits = [made.permission].concat(made.password ? ["password"] : [], made.uses !== null ? [made.uses + " uses"] : []);
          return item([made.path + " (" + traits.join(", ") + until(made) + ") ", end]);
        }));
        if (!links.length) list.append(item(["You have published no link."]));
      }, report);
  }
  if (sharesOpen) sharesOpen.addEventListener("click", showShares);
  const shareForm = document.getElementById("share-form");
  // The path on the server of a link in the page (what follows the base path).
  const pathOf = (href) => decodeURIComponent(new URL(href, location.href).pathname.slice(base.length)).replace(/(.)\/$/, "$1");
  function openShareForm(href) {
    if (!shareForm) return;
    shareForm.dataset.path = pathOf(href);
    document.getElementById("share-what").textContent = shareForm.dataset.path;
    shareForm.hidden = false;
    shareForm.elements.to.focus();
  }
  const shareHere = document.getElementById("share-here");
  if (shareHere) shareHere.addEventListener("click", () => openShareForm(here));
  if (shareForm) {
    document.getElementById("share-cancel").addEventListener("click", () => { shareForm.hidden = true; });
    shareForm.addEventListener("submit", (event) => {
      event.preventDefault();
      const fields = shareForm.elements;
      const wanted = { path: shareForm.dataset.path, to: fields.to.value.trim(), permission: fields.permission.value };
      if (fields.expires.value) wanted.expires_at = new Date(fields.expires.value).toISOString();
      send("POST", sharesApi, { "Content-Type": "application/json" }, JSON.stringify(wanted))
        .then(() => { shareForm.hidden = true; shareForm.reset(); showShares(); }, report);
    });
  }

  // Publishing a link: the answer holds its URL, shown once (kubedav keeps only a hash).
  const linkForm = document.getElementById("link-form");
  function openLinkForm(href) {
    if (!linkForm) return;
    linkForm.dataset.path = pathOf(href);
    document.getElementById("link-what").textContent = linkForm.dataset.path;
    document.getElementById("link-made").hidden = true;
    linkForm.hidden = false;
  }
  if (linkForm) {
    document.getElementById("link-cancel").addEventListener("click", () => { linkForm.hidden = true; linkForm.reset(); });
    linkForm.addEventListener("submit", (event) => {
      event.preventDefault();
      const fields = linkForm.elements;
      const wanted = { path: linkForm.dataset.path, permission: fields.permission.value };
      if (fields.password.value) wanted.password = fields.password.value;
      if (fields.expires.value) wanted.expires_at = new Date(fields.expires.value).toISOString();
      send("POST", linksApi, { "Content-Type": "application/json" }, JSON.stringify(wanted))
        .then((response) => response.json())
        .then((made) => {
          const shown = document.getElementById("link-url");
          shown.value = new URL(made.url, location.href).href;
          document.getElementById("link-made").hidden = false;
          shown.select();
          showShares();
        }, report);
    });
  }

  // The trash and a file's versions: listed with PROPFIND (the WebDAV listing any client
  // reads), restored with MOVE (an item) or COPY (a version), purged with DELETE.
  const trashOpen = document.getElementById("trash-open");
  const DAV = "DAV:", NEXTCLOUD = "http://nextcloud.org/ns";
  const listed = (url) =>
    fetch(url, { method: "PROPFIND", headers: { Depth: "1" }, credentials: "same-origin" })
      .then((response) => response.status === 207 ? response.text()
        : response.text().then((text) => Promise.reject(new Error(text || "PROPFIND " + response.status))))
      .then((text) => {
        const answer = new DOMParser().parseFromString(text, "application/xml");
        return Array.from(answer.getElementsByTagNameNS(DAV, "response")).slice(1).map((response) => ({
          href: response.getElementsByTagNameNS(DAV, "href")[0].textContent,
          value: (namespace, name) => {
            const found = response.getElementsByTagNameNS(namespace, name)[0];
            return found ? found.textContent : "";
          },
          folder: response.getElementsByTagNameNS(DAV, "collection").length > 0,
        }));
      });
  const cell = (...parts) => { const td = document.createElement("td"); td.append(...parts); return td; };
  const button = (text, onClick) => {
    const made = document.createElement("button");
    made.type = "button";
    made.textContent = text;
    made.addEventListener("click", onClick);
    return made;
  };
  const sized = (bytes) => {
    let value = Number(bytes), unit = 0;
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
    return unit ? value.toFixed(1) + " " + units[unit] : value + " B";
  };
  const fill = (id, rows, empty) => {
    const tbody = document.getElementById(id).tBodies[0];
    if (!rows.length) {
      const row = document.createElement("tr");
      const only = cell(empty);
      only.colSpan = 5;
      row.append(only);
      rows = [row];
    }
    tbody.replaceChildren(...rows);
  };
  let changed = false;
  function showTrash() {
    listed(trashOpen.dataset.href).then((items) => {
      fill("trash-items", items.reverse().map((item) => {
        const origin = item.value(NEXTCLOUD, "trashbin-original-location");
        const when = new Date(Number(item.value(NEXTCLOUD, "trashbin-deletion-time")) * 1000);
        const row = document.createElement("tr");
        row.dataset.origin = origin;
        row.append(
          cell(item.value(NEXTCLOUD, "trashbin-filename") + (item.folder ? "/" : "")),
          cell("/" + origin.split("/").slice(0, -1).join("/")),
          cell(when.toLocaleString()),
          cell(item.folder ? "" : sized(item.value(DAV, "getcontentlength"))),
          cell(
            button("Restore", () => restore(item.href, origin, false)),
            button("Delete forever", () => {
              if (window.confirm("Delete /" + origin + " for good? It cannot be restored afterwards.")) send("DELETE", item.href).then(showTrash, report);
            }),
          ),
        );
        return row;
      }), "The trash is empty.");
      document.getElementById("trash").hidden = false;
    }, report);
  }
  // Restores an item where it was; a taken name is replaced only when the user agrees.
  function restore(href, origin, overwrite) {
    const destination = new URL(base + "/" + origin.split("/").map(segment).join("/"), location.href).href;
    fetch(href, { method: "MOVE", headers: Object.assign({}, proof, { Destination: destination, Overwrite: overwrite ? "T" : "F" }), credentials: "same-origin" })
      .then((response) => {
        if (response.status === 412 && !overwrite) {
          const replace = "/" + origin + " exists. Replace it? What is there now is kept: a file as a version, a folder in the trash.";
          if (window.confirm(replace)) restore(href, origin, true);
          return;
        }
        if (!response.ok) return response.text().then((text) => report(new Error("MOVE " + response.status + ": " + text)));
        changed = true;
        document.getElementById("status").textContent = "restored /" + origin;
        showTrash();
      }, report);
  }
  if (trashOpen) {
    trashOpen.addEventListener("click", showTrash);
    document.getElementById("trash-close").addEventListener("click", () => {
      document.getElementById("trash").hidden = true;
      if (changed) location.reload();
    });
    document.getElementById("trash-empty").addEventListener("click", () => {
      if (window.confirm("Delete everything in the trash for good?")) send("DELETE", trashOpen.dataset.href).then(showTrash, report);
    });
    document.getElementById("versions-close").addEventListener("click", () => {
      document.getElementById("versions").hidden = true;
      if (changed) location.reload();
    });
  }
  function showVersions(href, name) {
    const path = pathOf(href);
    document.getElementById("versions-of").textContent = path;
    listed(trashOpen.dataset.versions + path.split("/").map(segment).join("/")).then((versions) => {
      fill("versions-list", versions.reverse().map((version) => {
        const download = document.createElement("a");
        download.href = version.href;
        download.download = name;
        download.textContent = "Download";
        const row = document.createElement("tr");
        row.append(
          cell(new Date(version.value(DAV, "getlastmodified")).toLocaleString()),
          cell(sized(version.value(DAV, "getcontentlength"))),
          cell(download, writable ? button("Restore", () => {
            if (!window.confirm("Make this version the content of " + name + "? The content it replaces is kept as a version.")) return;
            const destination = new URL(href, location.href).href;
            send("COPY", version.href, { Destination: destination, Overwrite: "T" }).then(() => {
              changed = true;
              document.getElementById("status").textContent = "restored a version of " + path;
              showVersions(href, name);
            }, report);
          }) : ""),
        );
        return row;
      }), "No earlier versions are kept of " + name + ".");
      document.getElementById("versions").hidden = false;
    }, report);
  }

  // Sign-out ends the session everywhere, then lets the identity provider end its own.
  const signOut = document.getElementById("sign-out");
  if (signOut) {
    signOut.addEventListener("click", () => {
      fetch(signOut.dataset.href, { method: "POST", headers: proof, credentials: "same-origin" })
        .then((response) => response.ok ? response.json() : Promise.reject(new Error("sign-out: " + response.status)))
        .then((answer) => { location.href = answer.redirect; }, report);
    });
  }

  if (!writable) {
    // Files dropped where nothing may be written get a sentence saying so, rather than
    // the browser opening them in place of the page.
    const drop = document.getElementById("drop");
    drop.addEventListener("dragover", (event) => event.preventDefault());
    drop.addEventListener("drop", (event) => {
      event.preventDefault();
      const where = decodeURIComponent(here);
      report(new Error("You may only read " + where + ": nothing can be uploaded or changed here."));
    });
    return;
  }

  // New folder.
  document.getElementById("mkdir").addEventListener("click", () => {
    const name = window.prompt("New folder name");
    if (!name || name.includes("/")) return;
    send("MKCOL", here + segment(name) + "/").then(() => location.reload(), report);
  });

  // Uploads: one PUT per file (TUS for large ones, below) with a progress bar each and
  // one for the total; the folders of a folder upload are made first, parents before
  // children.
  const uploads = document.getElementById("uploads");
  function upload(files) {
    if (!files.length) return;
    const total = files.reduce((sum, f) => sum + f.file.size, 0) || 1;
    const done = new Map();
    const totalBar = bar("all " + files.length + " files", total);
    const folders = new Set();
    for (const f of files) {
      const parts = f.path.split("/");
      for (let i = 1; i < parts.length; i++) folders.add(parts.slice(0, i).join("/"));
    }
    const ordered = Array.from(folders).sort((a, b) => a.split("/").length - b.split("/").length);
    let chain = Promise.resolve();
    for (const folder of ordered) {
      const url = here + folder.split("/").map(segment).join("/") + "/";
      chain = chain.then(() => fetch(url, { method: "MKCOL", headers: proof, credentials: "same-origin" }));
    }
    chain.then(() => Promise.all(files.map((f) => put(f, (sent) => {
      done.set(f.path, sent);
      totalBar.value = Array.from(done.values()).reduce((a, b) => a + b, 0);
    })))).then(() => { totalBar.dataset.done = "true"; location.reload(); }, report);
  }
  function bar(label, max) {
    const line = document.createElement("div");
    const text = document.createElement("span");
    text.textContent = label + " ";
    const progress = document.createElement("progress");
    progress.max = max;
    progress.value = 0;
    line.append(text, progress);
    uploads.appendChild(line);
    return progress;
  }
  function put(entry, onProgress) {
    const progress = bar(entry.path, entry.file.size || 1);
    progress.className = "file";
    if (tusEndpoint && window.tus && window.tus.isSupported && entry.file.size > TUS_ABOVE) {
      return viaTus(entry, progress, onProgress);
    }
    return new Promise((resolve, reject) => {
      const request = new XMLHttpRequest();
      request.open("PUT", here + entry.path.split("/").map(segment).join("/"));
      request.setRequestHeader("X-Kubedav-Request", "1");
      request.upload.addEventListener("progress", (event) => {
        progress.value = event.loaded;
        onProgress(event.loaded);
      });
      request.addEventListener("load", () => {
        if (request.status >= 200 && request.status < 300) {
          progress.value = progress.max;
          onProgress(entry.file.size);
          resolve();
        } else reject(new Error("PUT " + entry.path + ": " + request.status + " " + request.responseText));
      });
      request.addEventListener("error", () => reject(new Error("PUT " + entry.path + " failed")));
      request.send(entry.file);
    });
  }
  // Files over 8 MiB go by TUS (tus-js-client), in requests of 8 MiB that pass any
  // Ingress's body limit. An upload resumes where it stopped: after a dropped network by
  // itself, and after a reload when the same file is picked again for the same folder
  // (tus-js-client remembers it in localStorage under the file and its target).
  const tusEndpoint = body.dataset.uploads;
  const TUS_ABOVE = 8 * 1024 * 1024;
  function viaTus(entry, progress, onProgress) {
    const base = body.dataset.base || "";
    const target = decodeURIComponent(here.slice(base.length)) + entry.path;
    return new Promise((resolve, reject) => {
      const upload = new window.tus.Upload(entry.file, {
        endpoint: tusEndpoint,
        chunkSize: TUS_ABOVE,
        retryDelays: [0, 1000, 3000, 5000, 10000, 20000, 30000],
        // tus-js-client gives up at once while the browser says it is offline; a dropped
        // network is what the retries are for. A refusal (4xx but 409 and 423) is final.
        onShouldRetry: (error) => {
          const status = error.originalResponse ? error.originalResponse.getStatus() : 0;
          return !(status >= 400 && status < 500) || status === 409 || status === 423;
        },
        metadata: { path: target, filename: entry.file.name },
        headers: proof,
        removeFingerprintOnSuccess: true,
        fingerprint: (file) =>
          Promise.resolve(["kubedav", tusEndpoint, target, file.size, file.lastModified].join(" ")),
        onProgress: (sent) => {
          progress.value = sent;
          onProgress(sent);
        },
        onSuccess: () => {
          progress.value = progress.max;
          onProgress(entry.file.size);
          resolve();
        },
        onError: (error) => reject(new Error("upload of " + entry.path + ": " + error.message)),
      });
      upload.findPreviousUploads().then((previous) => {
        if (previous.length) {
          progress.dataset.resumed = "true";
          progress.previousSibling.textContent = entry.path + " (resumed where it stopped) ";
          upload.resumeFromPreviousUpload(previous[0]);
        }
        upload.start();
      }, reject);
    });
  }
  const picked = (input) => Array.from(input.files).map((file) => ({ file, path: file.webkitRelativePath || file.name }));
  for (const id of ["files", "folder"]) {
    const input = document.getElementById(id);
    input.addEventListener("change", () => upload(picked(input)));
  }
  const drop = document.getElementById("drop");
  drop.addEventListener("dragover", (event) => { event.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    upload(Array.from(event.dataTransfer.files).map((file) => ({ file, path: file.name })));
  });
})();
