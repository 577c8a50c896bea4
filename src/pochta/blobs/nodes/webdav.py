"""A disk on a WebDAV storage node: nginx with its dav module, over HTTP (seed 004).

    create   the bytes go to ``tmp/<random>.part`` in one PUT: held back up to ``STREAM_AFTER``
             bytes (a small file is one PUT with a Content-Length, sent by ``commit``), then
             streamed chunked from a thread while the loader goes on hashing and feeding the
             sibling disk's PUT: both copies travel at once
    commit   ends the PUT; the node's answer (201/204) means nginx has the whole file under
             the temporary name (it renames its own temp file into place: a PUT lands whole)
    abort    a PUT in flight is cut (the connection is dropped mid-body: nginx keeps nothing);
             a finished one is DELETEd
    publish  MOVE to ``ab/cd/<key>`` with ``Overwrite: T`` (a rename on the node: the second
             of two loaders storing one file replaces the first copy with the same bytes)
    open     GET, with ``Range`` for a part; the whole size from ``Content-Range``
    size     HEAD;  delete  DELETE (a file not there is no error)
    free     GET of the report the storage host writes (``pochta.blobs.nodes.report``)
    walk     GET of each directory as nginx's ``autoindex_format json`` listing

What nginx does not do: it does not fsync. A file is on the node's page cache when the PUT is
answered and on its disk within the kernel's writeback delay (``vm.dirty_expire_centisecs``,
30 s by default). A crash of one node in that window loses its copy, not the file: the pair's
other copy is on another node, and Valkyrie there recreates the lost one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import secrets
import threading
from collections.abc import Iterator
from email.utils import parsedate_to_datetime

import urllib3
from urllib3.exceptions import HTTPError

from pochta.blobs.nodes.client import NodeClient, status_error
from pochta.blobs.nodes.report import REPORT_NAME, parse_report
from pochta.errors import DiskError, MissingFile
from pochta.types import DiskEntry, DiskSpec

log = logging.getLogger(__name__)

CHUNK = 1 << 20
PROBE = b"pochta probe\n"
STREAM_AFTER = 1 << 20  # bytes held back before a PUT starts streaming
QUEUE_CHUNKS = 8  # chunks buffered between the loader and a streaming PUT
MAX_LISTING = 64 << 20  # bytes of one directory listing
FREE_MAX_AGE = 300.0


class _End:
    pass


class _Abort(Exception):
    """Raised inside a streaming PUT's body: urllib3 drops the connection mid-body."""


_END = _End()


class _StreamingPut:
    """A PUT whose body is fed chunk by chunk from another thread."""

    def __init__(self, client: NodeClient, path: str, what: str) -> None:
        self._client = client
        self._queue: queue.Queue[bytes | _End | _Abort] = queue.Queue(QUEUE_CHUNKS)
        self._done = threading.Event()
        self.response: urllib3.BaseHTTPResponse | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(path, what), name="pochta-webdav-put", daemon=True
        )
        self._thread.start()

    def _body(self) -> Iterator[bytes]:
        while True:
            item = self._queue.get()
            if isinstance(item, _End):
                return
            if isinstance(item, _Abort):
                raise item
            yield item

    def _run(self, path: str, what: str) -> None:
        try:
            self.response = self._client.request("PUT", path, body=self._body(), what=what)
        except BaseException as exc:
            self.error = exc
        finally:
            self._done.set()

    def send(self, item: bytes | _End) -> None:
        while True:
            if self._done.is_set():
                raise self._failure()
            try:
                self._queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def finish(self) -> urllib3.BaseHTTPResponse:
        self.send(_END)
        self._thread.join()
        if self.response is None:
            raise self._failure()
        return self.response

    def cancel(self) -> None:
        while not self._done.is_set():
            with contextlib.suppress(queue.Empty):
                self._queue.get_nowait()  # make room
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait(_Abort())
            self._done.wait(0.05)
        self._thread.join()

    def _failure(self) -> DiskError:
        if isinstance(self.error, DiskError):
            return self.error
        return DiskError(f"node {self._client.node}: PUT failed: {self.error or 'it ended'}")


class WebDAVWriter:
    def __init__(self, disk: WebDAVDisk, name: str) -> None:
        self._disk = disk
        self._name = name
        self._buffer = bytearray()
        self._stream: _StreamingPut | None = None
        self._sent = False  # a PUT may have reached the node: abort must DELETE
        self._closed = False

    def probe(self) -> None:
        """One PUT of the probe bytes under the temporary name; the content's PUT (or a
        streaming one) replaces them, ``abort`` deletes them."""
        if self._closed or self._stream is not None or self._buffer:
            raise DiskError(f"disk {self._disk.spec}: a probe comes before the content")
        self._sent = True
        response = self._disk.client.request(
            "PUT", self._disk.path(self._name), body=PROBE, what=f"probe {self._name}"
        )
        if response.status not in (201, 204):
            raise status_error(self._disk.client.node, f"probe PUT {self._name}", response)

    def write(self, chunk: bytes) -> None:
        if self._closed:
            raise DiskError(f"disk {self._disk.spec}: write after commit or abort")
        if self._stream is None:
            self._buffer += chunk
            if len(self._buffer) < STREAM_AFTER:
                return
            self._stream = _StreamingPut(
                self._disk.client, self._disk.path(self._name), f"PUT {self._name}"
            )
            chunk, self._buffer = bytes(self._buffer), bytearray()
        self._stream.send(chunk)

    def commit(self) -> None:
        self._closed = True
        self._sent = True
        if self._stream is None:
            response = self._disk.client.request(
                "PUT", self._disk.path(self._name), body=bytes(self._buffer)
            )
            self._buffer = bytearray()
        else:
            response = self._stream.finish()
        if response.status not in (201, 204):
            raise status_error(self._disk.client.node, f"PUT {self._name}", response)

    def commit_as(self, name: str) -> None:
        self.commit()
        self._disk.publish(self._name, name)

    def abort(self) -> None:
        self._closed = True
        self._buffer = bytearray()
        try:
            if self._stream is not None and self._stream.response is None:
                self._stream.cancel()
            if self._sent or (self._stream is not None and self._stream.response is not None):
                self._disk.delete(self._name)
        except Exception as exc:
            log.warning("disk %s: removing %s: %s", self._disk.spec, self._name, exc)


class WebDAVReader:
    """The answer to a GET, read chunk by chunk; ``skip`` / ``left`` cut it to the range
    asked for when the node sent more."""

    def __init__(
        self,
        disk: WebDAVDisk,
        response: urllib3.BaseHTTPResponse | None,
        size: int,
        skip: int = 0,
        left: int = 0,
    ) -> None:
        self.size = size
        self._disk = disk
        self._response = response
        self._skip = skip
        self._left = left
        self._drained = False  # the whole answer was read: its connection can be reused

    def __iter__(self) -> Iterator[bytes]:
        response = self._response
        if response is None:
            return
        try:
            for data in response.stream(CHUNK):
                if self._skip:
                    cut = min(self._skip, len(data))
                    data, self._skip = data[cut:], self._skip - cut
                data = data[: self._left]
                if data:
                    self._left -= len(data)
                    yield data
            self._drained = True
            if self._left > 0:
                raise DiskError(f"disk {self._disk.spec}: the node's answer ended early")
        except (HTTPError, OSError) as exc:
            raise self._disk.client.error("reading", exc) from exc
        finally:
            self.close()

    def close(self) -> None:
        response, self._response = self._response, None
        if response is None:
            return
        if not self._drained:
            response.close()  # unread bytes on the connection: drop it, not back in the pool
        response.release_conn()


def _content_range_total(response: urllib3.BaseHTTPResponse) -> int | None:
    value = response.headers.get("Content-Range", "")
    total = value.rpartition("/")[2]
    return int(total) if total.isdigit() else None


class WebDAVDisk:
    """One disk: the directory ``spec.root`` on the node ``spec.node``."""

    def __init__(
        self, spec: DiskSpec, client: NodeClient, *, free_max_age: float = FREE_MAX_AGE
    ) -> None:
        self.spec = spec
        self.client = client
        self.free_max_age = free_max_age

    def path(self, name: str) -> str:
        return f"{self.spec.root}/{name}"

    def _request(
        self,
        method: str,
        name: str,
        *,
        headers: dict[str, str] | None = None,
        stream: bool = False,
    ) -> urllib3.BaseHTTPResponse:
        what = f"{method} {name}"
        return self.client.request(
            method, self.path(name), headers=headers, stream=stream, what=what
        )

    def create(self, name: str) -> WebDAVWriter:
        return WebDAVWriter(self, name)

    def publish(self, tmp_name: str, name: str) -> None:
        response = self._request(
            "MOVE",
            tmp_name,
            headers={"Destination": self.client.url(self.path(name)), "Overwrite": "T"},
        )
        if response.status not in (201, 204):
            raise status_error(self.client.node, f"MOVE {tmp_name} to {name}", response)

    def open(self, name: str, start: int = 0, end: int | None = None) -> WebDAVReader:
        if end is not None and end <= start:  # nothing to read: only the size
            size = self.size(name)
            if size is None:
                raise MissingFile(f"{name} is not on disk {self.spec}")
            return WebDAVReader(self, None, size)
        headers = {}
        if start > 0 or end is not None:
            headers["Range"] = f"bytes={start}-" + ("" if end is None else str(end - 1))
        response = self._request("GET", name, headers=headers, stream=True)
        status = response.status
        if status in (200, 206):
            total = _content_range_total(response) if status == 206 else None
            length = response.headers.get("Content-Length")
            if total is None and status == 200 and length is not None and length.isdigit():
                total = int(length)
            if total is None:
                response.close()
                raise DiskError(f"disk {self.spec}: GET {name}: the node gave no size")
            if status == 206:
                first = int(response.headers["Content-Range"].split()[1].split("-")[0])
                skip = max(0, start - first)
            else:
                skip = start  # the node ignored the range: cut it here
            stop = total if end is None else min(end, total)
            return WebDAVReader(self, response, total, skip, max(0, stop - start))
        response.drain_conn()
        response.release_conn()
        if status == 404:
            raise MissingFile(f"{name} is not on disk {self.spec}")
        if status == 416:  # the range starts at or past the end
            total = _content_range_total(response)
            if total is not None:
                return WebDAVReader(self, None, total)
        raise status_error(self.client.node, f"GET {name}", response)

    def size(self, name: str) -> int | None:
        response = self._request("HEAD", name)
        if response.status == 404:
            return None
        length = response.headers.get("Content-Length", "")
        if response.status != 200 or not length.isdigit():
            raise status_error(self.client.node, f"HEAD {name}", response)
        return int(length)

    def delete(self, name: str) -> None:
        response = self._request("DELETE", name)
        if response.status not in (200, 204, 404):
            raise status_error(self.client.node, f"DELETE {name}", response)

    def free_bytes(self) -> int:
        response = self._request("GET", REPORT_NAME)
        where = f"disk {self.spec}"
        if response.status == 404:
            raise DiskError(
                f"{where} has no free-space report: run `pochta valkyrie run --disk <its"
                " directory>` on its storage host"
            )
        if response.status != 200:
            raise status_error(self.client.node, f"GET {REPORT_NAME}", response)
        age = _age(response)
        if age is not None and age > self.free_max_age:
            raise DiskError(
                f"{where}: its free-space report is {age:.0f} s old (more than"
                f" {self.free_max_age:.0f} s): is Valkyrie running on its storage host?"
            )
        return parse_report(response.data, where)

    def probe(self) -> None:
        name = f"tmp/probe-{secrets.token_hex(8)}.part"
        writer = self.create(name)
        try:
            writer.probe()
        finally:
            writer.abort()

    def walk(self, after: str = "") -> Iterator[DiskEntry]:
        entries = self._listing("")
        if entries is None:
            raise DiskError(f"disk {self.spec}: its root is not there (GET {self.spec.root}/)")
        yield from self._walk(entries, "", after)

    def _walk(self, entries: list[DiskEntry], prefix: str, after: str) -> Iterator[DiskEntry]:
        for entry in entries:
            name = prefix + entry.name
            if entry.size < 0:  # a directory
                if name < after and not after.startswith(name + "/"):
                    continue  # everything below sorts before ``after``
                below = self._listing(name + "/")
                if below is not None:  # None: removed while we looked
                    yield from self._walk(below, name + "/", after)
            elif name > after:
                yield DiskEntry(name, entry.size, entry.mtime)

    def _listing(self, directory: str) -> list[DiskEntry] | None:
        """One directory's entries, sorted as ``walk`` yields them (a directory as if its
        name ended in '/'), with size -1 for a directory; dot-names at the root skipped
        (the node's own: nginx's temporary files, the free-space report)."""
        response = self._request("GET", directory, stream=True)
        try:
            if response.status == 404:
                return None
            if response.status != 200:
                hint = (
                    " (is `autoindex on; autoindex_format json;` set for this location?)"
                    if response.status == 403
                    else ""
                )
                raise status_error(self.client.node, f"listing {directory or '/'}", response, hint)
            body = response.read(MAX_LISTING + 1)
            if len(body) > MAX_LISTING:
                raise DiskError(f"disk {self.spec}: listing {directory} is over {MAX_LISTING} B")
        except (HTTPError, OSError) as exc:
            raise self.client.error(f"listing {directory or '/'}", exc) from exc
        finally:
            response.release_conn()
        try:
            items = json.loads(body)
            entries = []
            for item in items:
                name = str(item["name"])
                if not directory and name.startswith("."):
                    continue
                mtime = parsedate_to_datetime(item["mtime"]).timestamp()
                is_dir = item["type"] == "directory"
                size = -1 if is_dir else int(item["size"])
                entries.append(DiskEntry(name, size, mtime))
        except (ValueError, KeyError, TypeError) as exc:
            raise DiskError(
                f"disk {self.spec}: listing {directory or '/'} is not nginx's JSON autoindex"
                f" ({exc}); set `autoindex_format json;`"
            ) from None
        entries.sort(key=lambda e: e.name + ("/" if e.size < 0 else ""))
        return entries


def _age(response: urllib3.BaseHTTPResponse) -> float | None:
    """Seconds between the file's Last-Modified and the answer's Date (the node's clock)."""
    try:
        date = parsedate_to_datetime(response.headers["Date"])
        modified = parsedate_to_datetime(response.headers["Last-Modified"])
    except (KeyError, TypeError, ValueError):
        return None
    return (date - modified).total_seconds()
