"""Wire format between `OpenAIProvider` and its client worker processes (`llm.client_processes` > 1).

One frame = 4-byte big-endian length of the rest, 1-byte frame type, 4-byte call id, data.

  main -> worker   CONFIG  (id 0)   JSON {api_key, base_url, timeout_s}; always the first frame
                   REQUEST          the chat-completion JSON body, already serialised
                   CANCEL           the call with this id was cancelled: stop it
  worker -> main   READY   (id 0)   its client is built (sent once, after CONFIG)
                   OK               the raw response body (bytes as received; parsed by the main process)
                   ERROR            JSON {kind, retry_after, detail}: the attempt's exception, classified and
                                    redacted in the worker by `openai_provider.classify_error` / `redact`

The API key travels only in the CONFIG frame over the private socketpair: never in argv or the environment.
"""

from __future__ import annotations

import json
import struct
from typing import Any

CONFIG, REQUEST, CANCEL, READY, OK, ERROR = b"C", b"R", b"X", b"Y", b"O", b"E"
_HEAD = struct.Struct(">IcI")  # length of (type + id + data), type, id
HEAD_SIZE = _HEAD.size
_LEN = struct.Struct(">I")
MAX_FRAME_BYTES = 256 * 1024 * 1024


class RemoteAttemptError(Exception):
    """An attempt that failed inside a client worker process, already classified and redacted there.

    `openai_provider.classify_error` returns (kind, retry_after) of it; `str()` is the redacted detail.
    """

    def __init__(self, kind: str, retry_after: float | None, detail: str):
        super().__init__(detail)
        self.kind = kind
        self.retry_after = retry_after
        self.detail = detail


def encode(frame_type: bytes, call_id: int, data: bytes = b"") -> bytes:
    return _HEAD.pack(len(data) + 5, frame_type, call_id) + data


def encode_error(call_id: int, kind: str, retry_after: float | None, detail: str) -> bytes:
    return encode(ERROR, call_id, json.dumps({"kind": kind, "retry_after": retry_after, "detail": detail}).encode())


def decode_error(data: bytes) -> RemoteAttemptError:
    fields: dict[str, Any] = json.loads(data)
    return RemoteAttemptError(str(fields["kind"]), fields.get("retry_after"), str(fields["detail"]))


def split_frames(buffer: bytearray) -> list[tuple[bytes, int, bytes]]:
    """Remove every complete frame from the front of `buffer`; returns [(type, call id, data)].

    A frame longer than MAX_FRAME_BYTES is a protocol error (ValueError): the peer is not a worker of ours.
    """
    frames = []
    start, end = 0, len(buffer)
    while end - start >= HEAD_SIZE:
        (length,) = _LEN.unpack_from(buffer, start)
        if length > MAX_FRAME_BYTES or length < 5:
            raise ValueError(f"client worker frame of {length} bytes is out of range")
        if end - start < 4 + length:
            break
        _, frame_type, call_id = _HEAD.unpack_from(buffer, start)
        frames.append((frame_type, call_id, bytes(buffer[start + HEAD_SIZE:start + 4 + length])))
        start += 4 + length
    if start:
        del buffer[:start]
    return frames
