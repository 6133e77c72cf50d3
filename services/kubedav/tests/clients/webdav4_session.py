"""A session of Python's webdav4 client through its fsspec interface, as a data
pipeline would use it: make a folder, copy a local file in, list, rename, copy it
back out, delete. Run by tests/clients.rs with the server's URL; any failure raises."""

import os
import sys
import tempfile

from webdav4.fsspec import WebdavFileSystem

url = sys.argv[1]
fs = WebdavFileSystem(url)
payload = os.urandom(300_000) + "naïve name".encode()

with tempfile.TemporaryDirectory() as local:
    source = os.path.join(local, "in.bin")
    with open(source, "wb") as f:
        f.write(payload)
    fs.mkdir("py")
    fs.put_file(source, "py/data.bin")
    with fs.open("py/notes.txt", "wb") as f:
        f.write("written through fsspec".encode())
    names = sorted(os.path.basename(entry["name"].rstrip("/")) for entry in fs.ls("py", detail=True))
    assert names == ["data.bin", "notes.txt"], names
    assert fs.info("py/data.bin")["size"] == len(payload), fs.info("py/data.bin")
    fs.mv("py/data.bin", "py/renamed.bin")
    assert not fs.exists("py/data.bin")
    back = os.path.join(local, "back.bin")
    fs.get_file("py/renamed.bin", back)
    with open(back, "rb") as f:
        assert f.read() == payload, "the copy out differs"
    with fs.open("py/notes.txt", "rb") as f:
        assert f.read() == b"written through fsspec"
    fs.rm("py", recursive=True)
    assert not fs.exists("py")
print("webdav4 session ok")
