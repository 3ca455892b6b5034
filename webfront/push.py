"""``GET /api/events``: a server-sent event stream per player, fed by the version bumps.

Every snapshot version bump (``common.snapshot_versions``) and every alert a game
sends (``Tx.alert``) is published on the world's Redis channel. Each web process
holds ONE subscription to it (``PushHub``) and hands each message to the open
streams of its players (a dict player -> channels), never a Redis connection per
browser. A stream carries:

- ``event: version`` ``data: {"version": N}``: the player's snapshot changed; fetch it
  (its ETag is ``"N"``).
- ``event: alert`` ``data: {"kind": ..., "data": {...}}``: e.g. ``incoming_attack``.
- ``event: resync``: messages may have been lost (the subscription was re-made, e.g.
  after a Redis restart): fetch the snapshot.
- a comment every ``heartbeat_s`` so proxies keep the connection open. One timer of the
  hub writes the due ones, each stream on its own random phase: streams opened together
  (a deploy, a reconnect wave) do not all beat in the same instant. The streams wait in
  lists by the sweep they are due at, so a sweep visits only its own.

The hub writes each message (and heartbeat) straight to the stream's transport, framed as
an HTTP chunk: no task wakes per message, so a push costs the process a fraction of the
poll it spares. A stream's handler only waits for its end (the client left, it was dropped,
the server stops). A client that leaves is noticed at its next message or heartbeat.

A client that falls ``buffer_bytes`` behind (bytes the transport could not send yet, or
waiting for the stream to start) is dropped (its connection closed), so it never holds up
the others; the SDK then polls. At most ``PUSH_MAX_CHANNELS`` streams are open per
process; one more is answered 503.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass

import hiredis
from aiohttp import HttpVersion11, web
from redis.connection import parse_url

from common import supervise
from common.snapshot_versions import push_channel
from webfront.auth import authenticate
from webfront.errors import ApiError
from webfront.routing import Endpoint
from webfront.state import METRICS, SETTINGS

log = logging.getLogger("webfront.push")

_RESYNC = b"event: resync\ndata: {}\n\n"
_HEARTBEAT = b": keep-alive\n\n"
# the browser's EventSource waits this long before it reconnects
_HELLO = b"retry: 5000\n: connected\n\n"
_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",  # nginx: pass each event on at once
}


@dataclass(frozen=True)
class PushConfig:
    heartbeat_s: float = 15.0  # a comment this often on every stream, events or not
    buffer_bytes: int = 64 * 1024  # unsent bytes a stream may hold before it is dropped
    retry_min_s: float = 0.1  # wait before re-subscribing after a Redis failure, doubling
    retry_max_s: float = 5.0


class Channel:
    """One open stream: its transport once the stream has started, what waits until then,
    and its end."""

    __slots__ = ("chunked", "ended", "pending", "pending_bytes", "player_id", "transport")

    def __init__(self, player_id: int) -> None:
        self.player_id = player_id
        self.transport: asyncio.Transport | None = None  # set when the stream starts
        self.chunked = False  # HTTP/1.1: each write is a chunk
        self.pending: list[bytes] = []  # messages before the stream started
        self.pending_bytes = 0
        self.ended = asyncio.Event()  # the handler returns when set

    def write(self, data: bytes) -> None:
        """``data`` on the wire now (the transport buffers what the socket cannot take)."""
        assert self.transport is not None
        if self.chunked:
            data = b"%x\r\n%b\r\n" % (len(data), data)
        self.transport.write(data)

    def unsent(self) -> int:
        return (
            self.pending_bytes if self.transport is None else self.transport.get_write_buffer_size()
        )


class PushHub:
    """This process's subscription and its open streams."""

    def __init__(self, redis_url: str, prefix: str, max_channels: int, config: PushConfig) -> None:
        self.redis_url = redis_url
        self.channel_name = push_channel(prefix)
        self.client_name = f"{prefix}:push"  # findable in CLIENT LIST
        self.max_channels = max_channels
        self.config = config
        self.channels: dict[int, set[Channel]] = {}
        self.count = 0
        self.dropped = 0  # streams dropped for falling behind, since start
        self.subscriptions = 0  # (re)subscriptions made, since start
        self.changed = asyncio.Condition()  # notified when a stream closes
        self.subscribed = asyncio.Event()  # set while the subscription is up
        self.subscribed_once = False  # the last connection got as far as subscribing
        # the heartbeats by the sweep they are due at: a sweep visits only its own streams
        self.sweep_s = min(0.25, config.heartbeat_s / 4)
        self.sweeps = 0
        self.beats: dict[int, list[Channel]] = {}

    # ---- streams

    def open(self, player_id: int) -> Channel:
        """A stream for ``player_id``, receiving from now on (503 when the process holds
        all it can); ``start`` it once its response headers are out."""
        if self.count >= self.max_channels:
            raise ApiError(
                503,
                "unavailable",
                "this server holds all the event streams it can; poll the snapshot instead",
                headers={"Retry-After": "30"},
            )
        channel = Channel(player_id)
        self._beat_after(channel, self.config.heartbeat_s * _phase())
        self.channels.setdefault(player_id, set()).add(channel)
        self.count += 1
        return channel

    def start(self, channel: Channel, transport: asyncio.Transport, chunked: bool) -> None:
        """From now on the hub writes ``channel``'s messages to ``transport`` itself; what
        came before goes first."""
        if channel.ended.is_set():
            return
        channel.transport, channel.chunked = transport, chunked
        pending, channel.pending, channel.pending_bytes = channel.pending, [], 0
        if pending:
            self._send(channel, b"".join(pending))

    async def close(self, channel: Channel) -> None:
        held = self.channels.get(channel.player_id)
        if held is None or channel not in held:
            return
        held.discard(channel)
        channel.ended.set()  # and its heartbeats stop
        if not held:
            del self.channels[channel.player_id]
        self.count -= 1
        async with self.changed:
            self.changed.notify_all()

    def _send(self, channel: Channel, message: bytes) -> None:
        if channel.ended.is_set():
            return
        transport = channel.transport
        if transport is not None and transport.is_closing():
            channel.ended.set()  # the client left
        elif channel.unsent() > self.config.buffer_bytes:
            # a slow client: drop it (it polls) rather than buffer without bound
            self.dropped += 1
            channel.ended.set()
            channel.pending.clear()
            if transport is not None:
                transport.abort()
        elif transport is None:
            channel.pending.append(message)
            channel.pending_bytes += len(message)
        else:
            channel.write(message)

    def deliver(self, data: bytes) -> None:
        """One message of the Redis channel to the streams it concerns; a malformed message
        (ValueError, TypeError) reaches none: it is read whole before any is sent."""
        kind, _, rest = data.partition(b" ")
        out: list[tuple[int, bytes]] = []
        if kind == b"v":
            for change in rest.split(b" "):
                player, _, version = change.partition(b":")
                if not version.isdigit():  # written into the stream: digits only
                    raise ValueError("a version is not a number")
                player_id = int(player)
                if player_id in self.channels:  # most players of a batch stream elsewhere
                    out.append((player_id, b'event: version\ndata: {"version":%s}\n\n' % version))
        elif kind == b"a":
            for player, alert_kind, payload in json.loads(rest):
                if type(player) is not int or not isinstance(alert_kind, str):
                    raise TypeError("an alert is [player, kind, data]")
                body = json.dumps({"kind": alert_kind, "data": payload}).encode()
                out.append((player, b"event: alert\ndata: " + body + b"\n\n"))
        else:
            raise ValueError("an unknown kind of message")
        channels = self.channels
        for player_id, message in out:
            held = channels.get(player_id)
            if held:
                for channel in list(held):
                    self._send(channel, message)

    def resync(self) -> None:
        """Every stream may have missed messages: tell them all to refetch."""
        for held in list(self.channels.values()):
            for channel in list(held):
                self._send(channel, _RESYNC)

    async def stop(self) -> None:
        """End every stream (at shutdown: open streams would hold the server up)."""
        for held in list(self.channels.values()):
            for channel in held:
                channel.ended.set()

    def _beat_after(self, channel: Channel, seconds: float) -> None:
        sweep = self.sweeps + max(1, round(seconds / self.sweep_s))
        self.beats.setdefault(sweep, []).append(channel)

    async def beat(self) -> None:
        """Write the heartbeats that are due, a few sweeps per heartbeat period (a client
        that left is found here at the latest)."""
        while True:
            await asyncio.sleep(self.sweep_s)
            self.sweep()

    def sweep(self) -> None:
        """One sweep: the heartbeats due now."""
        self.sweeps += 1
        for channel in self.beats.pop(self.sweeps, ()):
            if channel.ended.is_set():
                continue  # closed: forgotten here
            if channel.transport is not None:
                self._send(channel, _HEARTBEAT)
            self._beat_after(channel, self.config.heartbeat_s)

    # ---- the one subscription

    async def run(self) -> None:
        """Subscribe and deliver until cancelled; re-subscribe after any failure."""
        delay = self.config.retry_min_s
        while True:
            try:
                await self._subscribed()
            except (OSError, EOFError, TimeoutError, hiredis.ProtocolError) as exc:
                log.warning("push subscription lost (%s); re-subscribing", type(exc).__name__)
            finally:
                self.subscribed.clear()
            if self.subscribed_once:
                delay = self.config.retry_min_s
                self.subscribed_once = False
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.config.retry_max_s)

    async def _subscribed(self) -> None:
        """One connection: subscribe, then deliver until it fails.

        A connection of its own, not redis-py's PubSub: a cancel must stop it at once (at
        shutdown), and it costs a few µs per message. When nothing came for a heartbeat
        it PINGs; nothing for another heartbeat is a dead connection.
        """
        options = parse_url(self.redis_url)
        async with asyncio.timeout(5):
            if "path" in options:
                reader, writer = await asyncio.open_unix_connection(options["path"])
            else:
                reader, writer = await asyncio.open_connection(
                    options.get("host", "localhost"),
                    options.get("port", 6379),
                    ssl=self.redis_url.startswith("rediss://") or None,
                )
        try:
            commands: list[tuple[str, ...]] = []
            if options.get("password"):
                user = options.get("username") or "default"
                commands.append(("AUTH", user, options["password"]))
            commands.append(("CLIENT", "SETNAME", self.client_name))
            commands.append(("SUBSCRIBE", self.channel_name))
            writer.write(b"".join(_pack(c) for c in commands))
            parser = hiredis.Reader()
            pinged = False
            while True:
                try:
                    async with asyncio.timeout(self.config.heartbeat_s):
                        data = await reader.read(1 << 16)
                except TimeoutError:
                    if pinged:
                        raise
                    writer.write(_pack(("PING",)))
                    pinged = True
                    continue
                if not data:
                    raise EOFError("Redis closed the connection")
                pinged = False
                parser.feed(data)
                while (reply := parser.gets()) is not False:
                    if isinstance(reply, hiredis.ReplyError):
                        raise hiredis.ProtocolError(str(reply))
                    if type(reply) is not list:
                        continue  # OK of AUTH and SETNAME
                    kind = reply[0]
                    if kind == b"message":
                        self._deliver_safely(reply[2])
                    elif kind == b"subscribe":
                        # (re)subscribed: anything published meanwhile was lost
                        self.subscriptions += 1
                        self.subscribed_once = True
                        self.subscribed.set()
                        self.resync()
        finally:
            writer.close()

    def _deliver_safely(self, data: bytes) -> None:
        try:
            self.deliver(data)
        except (ValueError, TypeError) as exc:  # not ours: another writer on the channel
            log.warning("push: a malformed message on %s: %s", self.channel_name, exc)


def _pack(args: tuple[str, ...]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        raw = arg.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(out)


def _phase() -> float:
    return random.uniform(0.5, 1.0)


PUSH = web.AppKey("push", PushHub)
PUSH_CONFIG = web.AppKey("push_config", PushConfig)


async def hub_context(app: web.Application) -> AsyncIterator[None]:
    """The hub and its subscription while the app runs (``app.cleanup_ctx``)."""
    settings = app[SETTINGS]
    config = app.get(PUSH_CONFIG) or PushConfig()
    hub = PushHub(settings.redis_url, settings.redis_prefix, settings.push_max_channels, config)
    app[PUSH] = hub
    if METRICS in app:
        app[METRICS].push = hub
    running = supervise.start("push-subscription", hub.run)
    beating = supervise.start("push-heartbeat", hub.beat)
    yield
    running.cancel()
    beating.cancel()
    await asyncio.gather(running, beating, return_exceptions=True)


async def stop_streams(app: web.Application) -> None:
    """``app.on_shutdown``: end the open streams so the server can stop."""
    if PUSH in app:
        await app[PUSH].stop()


def install(app: web.Application) -> None:
    app.cleanup_ctx.append(hub_context)
    app.on_shutdown.append(stop_streams)


async def events(request: web.Request) -> web.StreamResponse:
    player_id = await authenticate(request)  # errors before the stream: the JSON shape
    hub = request.app[PUSH]
    channel = hub.open(player_id)
    response = web.StreamResponse(headers=_HEADERS)
    chunked = request.version >= HttpVersion11
    if chunked:
        response.enable_chunked_encoding()
    try:
        await response.prepare(request)
        await response.write(_HELLO)
        transport = request.transport
        if transport is not None:
            hub.start(channel, transport, chunked)  # type: ignore[arg-type]
            await channel.ended.wait()
    except (ConnectionError, RuntimeError):
        pass  # the client left while we wrote (aiohttp raises one of these)
    finally:
        await hub.close(channel)
    return response


ENDPOINTS = [
    Endpoint(
        "GET",
        "/api/events",
        events,
        "The player's server-sent events: snapshot version changes, alerts, resync",
        "game",
        media_type="text/event-stream",
        errors=(503,),
    ),
]
