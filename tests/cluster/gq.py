#!/usr/bin/python3
"""Test helper: ask greenupd for one job over its Unix socket (root needs no MUNGE
credential there) and print the reply's job as JSON. Usage: gq.py SOCKET JOBID"""
import json, socket, sys

s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(json.dumps({"v": 1, "req": {"op": "get_job", "job_id": int(sys.argv[2])}}).encode() + b"\n")
buf = b""
while not buf.endswith(b"\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    buf += chunk
reply = json.loads(buf)
if not reply.get("ok"):
    print(json.dumps(reply.get("error")))
    sys.exit(1)
print(json.dumps(reply["reply"]))
