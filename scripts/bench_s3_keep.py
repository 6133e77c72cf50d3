#!/usr/bin/env python3
"""What the trash costs on S3: a collection of many objects deleted, and restored.

    python3 scripts/bench_s3_keep.py [BINARY] [--objects 10000] [--rounds 2]

One versitygw (posix backend, loopback, bucket versioning available), two buckets:

  kdav  kubedav all-in-one twice, each in its own prefix: nothing kept
        (`--trash-retention-days 0 --versions-max 0`), and the defaults (trash and
        versions on: way 1, server-side copies into `.kubedav/trash/`, then deletes)
  way1  way 1 done by this script with boto3, the same client as way 2, so that the two
        compare without kubedav's own speed: a copy and a deletion per object, and back
  way2  versioning on: way 2, the bucket's own versioning, done by this script with
        boto3 (a DELETE leaves a delete marker per object; a restore deletes the markers)

Each round fills a collection of OBJECTS small objects (1 KiB, written straight into
the bucket with 16 in flight, as another tool would), then:

  kubedav, nothing kept   DELETE of the collection
  kubedav, trash on       DELETE of the collection, then its restore (MOVE of the item)
  way 1 (boto3)           CopyObject then DeleteObject of each key (16 in flight), and
                          back
  way 2 (boto3)           DeleteObject of each key (16 in flight, as kubedav deletes),
                          then the restore: DeleteObject of each delete marker

And on each kubedav, 20 PUTs over one 4 KiB file (after 12, so versions are past
--versions-max): S3 requests per PUT.

Printed per round and setup: wall time and S3 requests, by action. kubedav's requests
are read from its own `kubedav_fileio_s3_requests_total`; way 2's are counted by the
script. The order of the setups turns each round.
"""

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchkit import announced, start  # noqa: E402
from ports import free_port  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY, SECRET = "bench-key", "bench-secret-key"
IN_FLIGHT = 16
NOTHING_KEPT = ["--trash-retention-days", "0", "--versions-max", "0"]


def s3_requests(admin):
    """kubedav's S3 requests so far, by action."""
    text = urllib.request.urlopen(f"http://{admin}/metrics", timeout=10).read().decode()
    counts = {}
    for action, value in re.findall(
        r'kubedav_fileio_s3_requests_total\{action="([^"]+)",outcome="ok"\} (\S+)', text
    ):
        counts[action] = counts.get(action, 0) + int(float(value))
    return counts


def difference(after, before):
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def dav(method, url, headers=None):
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=3600) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


class Bench:
    def __init__(self, options):
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            sys.exit("bench_s3_keep.py drives way 2 with boto3: python3 -m pip install boto3")

        self.options = options
        self.work = tempfile.mkdtemp(prefix="kubedav-bench-s3-keep.")
        self.procs = []
        port = free_port()
        for folder in ["s3", "versions"]:
            os.makedirs(f"{self.work}/{folder}")
        log = open(f"{self.work}/versitygw.log", "w")
        self.procs.append(subprocess.Popen(
            [options.versitygw, "--access", KEY, "--secret", SECRET, "--port", f"127.0.0.1:{port}",
             "posix", "--versioning-dir", f"{self.work}/versions", f"{self.work}/s3"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        endpoint = f"http://127.0.0.1:{port}"
        self.s3 = boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            config=Config(max_pool_connections=IN_FLIGHT * 2, retries={"max_attempts": 10}))
        deadline = time.time() + 30
        while True:
            try:
                self.s3.list_buckets()
                break
            except Exception:
                if time.time() > deadline:
                    sys.exit(f"versitygw never answered; see {self.work}/versitygw.log")
                time.sleep(0.1)
        for bucket in ["kdav", "way1", "way2"]:
            self.s3.create_bucket(Bucket=bucket)
        self.s3.put_bucket_versioning(Bucket="way2", VersioningConfiguration={"Status": "Enabled"})
        env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID=KEY,
                   AWS_SECRET_ACCESS_KEY=SECRET)
        self.kubedav = {}
        for name, extra in [("off", NOTHING_KEPT), ("on", [])]:
            log = f"{self.work}/kubedav-{name}.log"
            os.environ.update(env)
            self.procs.append(start(options.binary, log, [
                "--target=all", "--storage", f"s3://kdav/{name}", "--listen", "127.0.0.1:0",
                "--admin-listen", "127.0.0.1:0", *extra]))
            self.kubedav[name] = ("http://" + announced(log, "gateway HTTP"), announced(log, "all admin"))
        self.pool = concurrent.futures.ThreadPoolExecutor(IN_FLIGHT)

    def fill(self, bucket, prefix):
        body = b"k" * 1024
        keys = [f"{prefix}tree/d{i // 100:03d}/f{i:05d}.txt" for i in range(self.options.objects)]
        list(self.pool.map(lambda key: self.s3.put_object(Bucket=bucket, Key=key, Body=body), keys))
        return keys

    def keys(self, bucket, prefix):
        found = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            found += [item["Key"] for item in page.get("Contents", [])]
        return found

    def kubedav_round(self, name, restore):
        url, admin = self.kubedav[name]
        self.fill("kdav", f"{name}/")
        before = s3_requests(admin)
        began = time.monotonic()
        status, text = dav("DELETE", f"{url}/tree/")
        took = time.monotonic() - began
        if status != 204:
            sys.exit(f"kubedav {name}: DELETE /tree/ answered {status}: {text[:300]}")
        figures = [(f"kubedav, {'trash on' if name == 'on' else 'nothing kept'}: DELETE", took,
                    difference(s3_requests(admin), before))]
        if restore:
            status, listing = dav("PROPFIND", f"{url}/.kubedav/trash/", {"Depth": "1"})
            items = re.findall(r"<D:href>([^<]*/\.kubedav/trash/[^<]+)</D:href>", listing)
            if status != 207 or len(items) != 1:
                sys.exit(f"kubedav {name}: the trash holds {items} ({status})")
            before = s3_requests(admin)
            began = time.monotonic()
            status, text = dav("MOVE", url + items[0], {"Destination": f"{url}/tree/"})
            took = time.monotonic() - began
            if status != 201:
                sys.exit(f"kubedav {name}: the restore answered {status}: {text[:300]}")
            figures.append(("kubedav, trash on: restore (MOVE)", took, difference(s3_requests(admin), before)))
            if len(self.keys("kdav", f"{name}/tree/")) < self.options.objects:
                sys.exit(f"kubedav {name}: the restore left fewer than {self.options.objects} objects")
            dav("DELETE", f"{url}/tree/")
            status, _ = dav("DELETE", f"{url}/.kubedav/trash/")
        return figures

    def way2_round(self):
        # A prefix of its own each round: the versions of the rounds before stay behind.
        self.way2_rounds = getattr(self, "way2_rounds", 0) + 1
        prefix = f"round{self.way2_rounds}/"
        keys = self.fill("way2", prefix)
        counted = {"ListObjectsV2": 0, "DeleteObject": 0}
        began = time.monotonic()
        listed = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket="way2", Prefix=prefix + "tree/"):
            counted["ListObjectsV2"] += 1
            listed += [item["Key"] for item in page.get("Contents", [])]
        list(self.pool.map(lambda key: self.s3.delete_object(Bucket="way2", Key=key), listed))
        counted["DeleteObject"] += len(listed)
        deleted = ("way 2 (bucket versioning): DELETE", time.monotonic() - began, counted)
        counted = {"ListObjectVersions": 0, "DeleteObject": 0}
        began = time.monotonic()
        markers = []
        for page in self.s3.get_paginator("list_object_versions").paginate(Bucket="way2",
                                                                           Prefix=prefix + "tree/"):
            counted["ListObjectVersions"] += 1
            markers += [(m["Key"], m["VersionId"]) for m in page.get("DeleteMarkers", []) if m["IsLatest"]]
        list(self.pool.map(lambda m: self.s3.delete_object(Bucket="way2", Key=m[0], VersionId=m[1]), markers))
        counted["DeleteObject"] += len(markers)
        restored = ("way 2 (bucket versioning): restore", time.monotonic() - began, counted)
        if sorted(self.keys("way2", prefix + "tree/")) != sorted(keys):
            sys.exit("way 2: the restore did not bring every object back")
        return [deleted, restored]

    def overwrite_round(self, name, times=20):
        """PUT over one 4 KiB file `times` times (past --versions-max, so the oldest
        version goes each time with the trash on)."""
        url, admin = self.kubedav[name]
        body = b"v" * 4096
        for _ in range(12):
            urllib.request.urlopen(urllib.request.Request(f"{url}/over.txt", data=body, method="PUT"), timeout=60)
        before = s3_requests(admin)
        began = time.monotonic()
        for _ in range(times):
            urllib.request.urlopen(urllib.request.Request(f"{url}/over.txt", data=body, method="PUT"), timeout=60)
        took = (time.monotonic() - began) / times
        counts = {k: v / times for k, v in difference(s3_requests(admin), before).items()}
        kept = "versions on" if name == "on" else "nothing kept"
        return [(f"kubedav, {kept}: PUT over a 4 KiB file", took, counts)]

    def way1_round(self):
        """Way 1 done by the same client as way 2, so the two compare without kubedav:
        a copy of each key into a reserved prefix, then its deletion; the restore, back."""
        self.fill("way1", "")

        def move(keys, into, out_of):
            counted = {"ListObjectsV2": 0, "CopyObject": 0, "DeleteObject": 0}
            began = time.monotonic()
            listed = []
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket="way1", Prefix=out_of):
                counted["ListObjectsV2"] += 1
                listed += [item["Key"] for item in page.get("Contents", [])]

            def one(key):
                target = into + key[len(out_of):]
                self.s3.copy_object(Bucket="way1", Key=target, CopySource={"Bucket": "way1", "Key": key})
                self.s3.delete_object(Bucket="way1", Key=key)

            list(self.pool.map(one, listed))
            counted["CopyObject"] += len(listed)
            counted["DeleteObject"] += len(listed)
            return time.monotonic() - began, counted

        took, counted = move(None, ".kubedav/trash/item/", "tree/")
        figures = [("way 1 (copies, same client): DELETE", took, counted)]
        took, counted = move(None, "tree/", ".kubedav/trash/item/")
        figures.append(("way 1 (copies, same client): restore", took, counted))
        list(self.pool.map(lambda key: self.s3.delete_object(Bucket="way1", Key=key), self.keys("way1", "")))
        return figures

    def run(self):
        setups = [lambda: self.kubedav_round("off", False), lambda: self.kubedav_round("on", True),
                  self.way1_round, self.way2_round, lambda: self.overwrite_round("off"),
                  lambda: self.overwrite_round("on")]
        results = {}
        for round_number in range(self.options.rounds):
            order = setups[round_number % len(setups):] + setups[:round_number % len(setups)]
            for setup in order:
                for name, took, counts in setup():
                    results.setdefault(name, []).append((took, counts))
                    total = sum(counts.values())
                    print(f"round {round_number + 1}  {name:42s} {took:7.3f} s  {total:8.1f} S3 requests  "
                          + ", ".join(f"{k} {v:g}" for k, v in sorted(counts.items())), flush=True)
        print(f"\n{self.options.objects} objects; median wall time over {self.options.rounds} rounds, "
              "S3 requests (the same each round) per object:")
        for name, runs in results.items():
            times = sorted(took for took, _ in runs)
            total = sum(runs[0][1].values())
            if "PUT over" in name:
                print(f"  {name:42s} {times[len(times) // 2]:7.3f} s  {total:5.2f} requests/PUT")
            else:
                print(f"  {name:42s} {times[len(times) // 2]:7.2f} s  "
                      f"{total / self.options.objects:5.2f} requests/object")

    def stop(self):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(timeout=30)
        shutil.rmtree(self.work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary", nargs="?", default=os.path.join(REPO, "target", "release", "kubedav"))
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--versitygw", default=os.environ.get("KUBEDAV_VERSITYGW"))
    options = parser.parse_args()
    if not options.versitygw:
        options.versitygw = subprocess.run(["bash", os.path.join(REPO, "scripts", "need-versitygw.sh")],
                                           capture_output=True, text=True, check=True).stdout.strip()
    bench = Bench(options)
    try:
        bench.run()
    finally:
        bench.stop()


if __name__ == "__main__":
    main()
