"""Uploads a file with tuspy (TUS 1.0) chunk by chunk, each with its checksum, and
prints the offset after each chunk; resumes the upload at URL when one is given.
Driven by services/kubedav/tests/uploads.rs, which kills it (or a server) midway.

usage: tus_upload.py ENDPOINT FILE TARGET CHUNK_BYTES [URL]
The environment's TUS_AUTHORIZATION, when set, is sent as the Authorization header.
"""
import os
import sys

from tusclient import client

endpoint, path, target, chunk = sys.argv[1:5]
url = sys.argv[5] if len(sys.argv) > 5 else None
headers = {}
if os.environ.get("TUS_AUTHORIZATION"):
    headers["Authorization"] = os.environ["TUS_AUTHORIZATION"]
uploader = client.TusClient(endpoint, headers=headers).uploader(
    path,
    url=url,
    chunk_size=int(chunk),
    metadata={"path": target},
    upload_checksum=True,
    # As tus-js-client does by default: a chunk refused while a replica that died
    # still holds the upload in a bucket (423, for up to 8 s) is sent again.
    retries=4,
    retry_delay=3,
)
if not uploader.url:
    uploader.set_url(uploader.create_url())
    uploader.offset = 0
print("url", uploader.url, flush=True)
print("resumed at", uploader.offset, flush=True)
size = uploader.get_file_size()
while uploader.offset < size:
    uploader.upload_chunk()
    print("offset", uploader.offset, flush=True)
print("done", flush=True)
