#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The soak's fault proxy: sits between the extenders and kube-apiserver and breaks things
on command (test/soak/soak drives it; docs/soak.md).

It terminates TLS with the API server's own serving certificate (the e2e CA signed it for
127.0.0.1, so clients verify it as they would the server), offers only http/1.1 in ALPN, and
opens one TLS connection upstream per client connection.  Bytes are copied both ways; of
the client's side only the request heads are read (and the bodies' framing skipped), so
the proxy knows where each request starts and whether it is a watch.  Commands come on a
unix socket, one line each, answered with one line:

  cut        every open connection is cut: the next bytes the server sends on it are
             forwarded only in half, then both sides closed, so a watch stream ends in the
             middle of an event; a connection with nothing to forward within 1 s is closed
             then.
  gone N     cut, and the next N watch requests are answered 410 Gone without reaching the
             server: alternately an HTTP 410 Status and a 200 stream holding one ERROR event
             with code 410, the two ways kube-apiserver says a resourceVersion is too old.
  stats      the counters, as JSON (with the status codes of the server's answers, read
             from the first line of each: the clients send one request at a time).
"""
import argparse
import asyncio
import json
import os
import ssl
import sys

MAX_HEAD = 64 << 10


class Conn:
    def __init__(self, cw):
        self.cw = cw
        self.uw = None
        self.cut = False
        self.closed = False
        self.await_status = False  # a request went upstream: its answer's status line is next

    def close(self):
        if self.closed:
            return
        self.closed = True
        for w in (self.cw, self.uw):
            if w is not None:
                try:
                    w.transport.abort()
                except Exception:
                    pass


class Proxy:
    def __init__(self, a):
        self.a = a
        self.conns = set()
        self.gone_left = 0
        self.stats = {"connections": 0, "requests": 0, "watches": 0, "cuts": 0,
                      "connections_cut": 0, "gone_sent": 0, "upstream_failures": 0,
                      "status": {}}
        self.sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.sctx.load_cert_chain(a.cert, a.key)
        self.sctx.set_alpn_protocols(["http/1.1"])
        self.uctx = ssl.create_default_context(cafile=a.ca)
        self.uctx.set_alpn_protocols(["http/1.1"])

    async def upstream(self, c):
        ur, uw = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", self.a.upstream, ssl=self.uctx,
                                    server_hostname="127.0.0.1"), 5)
        c.uw = uw
        asyncio.ensure_future(self.s2c(c, ur))

    async def s2c(self, c, ur):
        try:
            while not c.closed:
                data = await ur.read(65536)
                if not data:
                    break
                if c.await_status and data.startswith(b"HTTP/1."):
                    c.await_status = False
                    code = data[9:12].decode("latin-1")
                    self.stats["status"][code] = self.stats["status"].get(code, 0) + 1
                if c.cut:
                    c.cw.write(data[:max(1, len(data) // 2)])
                    await c.cw.drain()
                    break
                c.cw.write(data)
                await c.cw.drain()
        except Exception:
            pass
        c.close()

    async def gone(self, c, n):
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": "too old resource version: 1 (2)", "reason": "Expired", "code": 410}
        if n % 2 == 0:
            body = json.dumps(status).encode()
            c.cw.write(b"HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        else:
            ev = json.dumps({"type": "ERROR", "object": status}).encode() + b"\n"
            c.cw.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
                       b"%x\r\n" % len(ev) + ev + b"\r\n0\r\n\r\n")
        await c.cw.drain()

    async def body(self, c, cr, headers):
        """Copies one request body upstream, by its framing."""
        te = headers.get("transfer-encoding", "").lower()
        if "chunked" in te:
            while True:
                line = await cr.readuntil(b"\r\n")
                c.uw.write(line)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers up to the empty line
                        t = await cr.readuntil(b"\r\n")
                        c.uw.write(t)
                        if t == b"\r\n":
                            return
                data = await cr.readexactly(size + 2)
                c.uw.write(data)
                await c.uw.drain()
        n = int(headers.get("content-length", "0") or "0")
        while n > 0:
            data = await cr.read(min(n, 65536))
            if not data:
                raise ConnectionError("client closed mid-body")
            c.uw.write(data)
            await c.uw.drain()
            n -= len(data)

    async def client(self, cr, cw):
        c = Conn(cw)
        self.conns.add(c)
        self.stats["connections"] += 1
        try:
            while not c.closed:
                head = await cr.readuntil(b"\r\n\r\n")
                if len(head) > MAX_HEAD:
                    break
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                target = parts[1] if len(parts) > 1 else ""
                headers = {}
                for ln in lines[1:]:
                    if ":" in ln:
                        k, v = ln.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                self.stats["requests"] += 1
                watch = "watch=true" in target or "watch=1" in target
                if watch:
                    self.stats["watches"] += 1
                    if self.gone_left > 0:
                        self.gone_left -= 1
                        self.stats["gone_sent"] += 1
                        await self.gone(c, self.stats["gone_sent"])
                        break
                if c.uw is None:
                    try:
                        await self.upstream(c)
                    except Exception:
                        self.stats["upstream_failures"] += 1
                        break
                c.await_status = True  # one request at a time: clients do not pipeline
                c.uw.write(head)
                await self.body(c, cr, headers)
                await c.uw.drain()
        except Exception:
            pass
        c.close()
        self.conns.discard(c)

    def cut(self):
        self.stats["cuts"] += 1
        for c in list(self.conns):
            c.cut = True
            self.stats["connections_cut"] += 1
            asyncio.get_event_loop().call_later(1.0, c.close)

    async def control(self, r, w):
        try:
            line = (await r.readline()).decode().split()
            if not line:
                pass
            elif line[0] == "cut":
                self.cut()
                w.write(b"ok\n")
            elif line[0] == "gone":
                self.gone_left += int(line[1]) if len(line) > 1 else 1
                self.cut()
                w.write(b"ok\n")
            elif line[0] == "stats":
                w.write(json.dumps(self.stats).encode() + b"\n")
            else:
                w.write(b"unknown command\n")
            await w.drain()
        finally:
            w.close()


async def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--listen", type=int, required=True, help="port on 127.0.0.1")
    p.add_argument("--upstream", type=int, required=True, help="kube-apiserver's port on 127.0.0.1")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--control", required=True, help="unix socket for commands")
    a = p.parse_args()
    px = Proxy(a)
    srv = await asyncio.start_server(px.client, "127.0.0.1", a.listen, ssl=px.sctx,
                                     limit=MAX_HEAD * 2)
    if os.path.exists(a.control):
        os.unlink(a.control)
    ctl = await asyncio.start_unix_server(px.control, a.control)
    print("apiproxy: listening on 127.0.0.1:%d -> %d" % (a.listen, a.upstream), flush=True)
    async with srv, ctl:
        await asyncio.gather(srv.serve_forever(), ctl.serve_forever())


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
