#!/usr/bin/python3
"""Test helper: talk to greenupd over its Unix socket (root needs no MUNGE credential
there) and print the reply as JSON.
  gq.py SOCKET JOBID                 the job (get_job)
  gq.py SOCKET open JOBID NODE...    open a job Slurm does not know (open_job, uid 0)"""
import json, socket, sys

sock, args = sys.argv[1], sys.argv[2:]
if args[0] == "open":
    req = {"op": "open_job", "job_id": int(args[1]), "uid": 0, "nodes": args[2:]}
else:
    req = {"op": "get_job", "job_id": int(args[0])}
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sock)
s.sendall(json.dumps({"v": 1, "req": req}).encode() + b"\n")
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
