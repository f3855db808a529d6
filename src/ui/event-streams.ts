/**
 * The dashboard's server-sent event streams (issue 15; backpressure: issue 29). Every stream of one route path shares
 * one channel: the route's JSON is read once per poll for all of that path's clients and sent as a `view` event when
 * it changed (a failed read as a `problem` event), with a comment line every 15 s so proxies keep the connection.
 *
 * Memory is bounded whatever the clients do (issue 29, "Backpressure"):
 * - `res.write` backpressure is honoured: while a client's socket has not drained, nothing more is written to it; the
 *   newest frame is remembered (a reference to the channel's buffer, encoded once for all of its clients, not a
 *   copy) and written on `drain`, so frames a
 *   slow client missed are coalesced into the latest view, never queued;
 * - a client whose unsent bytes exceed `maxBufferedBytes`, or that has not drained for `stallMs`, is disconnected
 *   (a browser's EventSource reconnects and gets the current view);
 * - at most `maxStreams` streams are open per process; one more is answered 503 with `Retry-After`.
 *
 * Owns the channels, the clients and the limits; reading the store is the caller's `read`.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../core/ports.js";
import { HttpError } from "./http-kit.js";

/** The limits of one process's streams. */
export interface StreamLimits {
  /** How often a channel re-reads its route, ms. */
  pollMs: number;
  /** Most streams open at once in this process. Default 64. */
  maxStreams?: number;
  /** Most unsent bytes one client may hold before it is disconnected. Default 4 MiB. */
  maxBufferedBytes?: number;
  /** How long a client may go without draining before it is disconnected, ms. Default 15 000. */
  stallMs?: number;
}

/** What a channel sends: the event name and its JSON data. */
export interface StreamFrame {
  event: "view" | "problem";
  data: string;
}

interface Client {
  res: ServerResponse;
  /** The newest frame not written yet because the socket had not drained. */
  pending?: Buffer;
  /** Since when the socket has not drained (ms since epoch); undefined while it keeps up. */
  blockedSince?: number;
}

interface Channel {
  path: string;
  clients: Set<Client>;
  /** The last frame sent (what a new client gets first), encoded once for all clients. */
  last?: Buffer;
  timer?: NodeJS.Timeout;
  ticks: number;
}

const HEARTBEAT = Buffer.from(": still here\n\n");

/** The streams of one dashboard process. */
export class EventStreams {
  readonly #channels = new Map<string, Channel>();
  readonly #maxStreams: number;
  readonly #maxBuffered: number;
  readonly #stallMs: number;
  readonly #sweep: NodeJS.Timeout;
  #open = 0;
  #dropped = 0;

  constructor(
    private readonly read: (path: string) => Promise<StreamFrame>,
    private readonly limits: StreamLimits,
    private readonly logger: Logger,
  ) {
    this.#maxStreams = limits.maxStreams ?? 64;
    this.#maxBuffered = limits.maxBufferedBytes ?? 4 * 1024 * 1024;
    this.#stallMs = limits.stallMs ?? 15_000;
    this.#sweep = setInterval(() => this.sweep(), Math.min(1_000, this.#stallMs));
    this.#sweep.unref();
  }

  /** Streams open now, and clients disconnected so far for not reading. */
  get counts(): { open: number; dropped: number } {
    return { open: this.#open, dropped: this.#dropped };
  }

  /** Starts a stream of `path` on `res`. Throws HttpError 503 when `maxStreams` are open already. */
  open(req: IncomingMessage, res: ServerResponse, path: string): void {
    if (this.#open >= this.#maxStreams) {
      res.setHeader("retry-after", "5");
      throw new HttpError(503, `The dashboard serves at most ${this.#maxStreams} live streams at once; retry later.`);
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store", connection: "keep-alive" });
    res.flushHeaders();
    const client: Client = { res };
    let channel = this.#channels.get(path);
    if (!channel) {
      channel = { path, clients: new Set(), ticks: 0 };
      this.#channels.set(path, channel);
      void this.tick(channel);
    } else if (channel.last !== undefined) this.deliver(client, channel.last);
    channel.clients.add(client);
    this.#open++;
    const ch = channel;
    res.on("drain", () => {
      client.blockedSince = undefined;
      const pending = client.pending;
      client.pending = undefined;
      if (pending !== undefined) this.deliver(client, pending);
    });
    req.once("close", () => this.remove(ch, client));
    res.once("close", () => this.remove(ch, client));
  }

  /** Ends every stream (the server closes). */
  closeAll(): void {
    clearInterval(this.#sweep);
    for (const channel of [...this.#channels.values()]) {
      for (const client of [...channel.clients]) {
        this.remove(channel, client);
        client.res.end();
      }
    }
  }

  private remove(channel: Channel, client: Client): void {
    if (!channel.clients.delete(client)) return;
    this.#open--;
    client.pending = undefined;
    if (channel.clients.size === 0) {
      if (channel.timer) clearTimeout(channel.timer);
      this.#channels.delete(channel.path);
    }
  }

  /** Disconnects a client that does not read (its socket is destroyed: nothing it holds stays buffered). */
  private drop(channel: Channel, client: Client, why: string): void {
    this.#dropped++;
    this.logger.info({ path: channel.path, why, buffered: client.res.writableLength }, "dashboard stream dropped");
    this.remove(channel, client);
    client.res.destroy();
  }

  /** Writes `frame` to `client` unless its socket has not drained (then it becomes the client's pending frame). */
  private deliver(client: Client, frame: Buffer): void {
    const res = client.res;
    if (res.destroyed) return;
    if (client.blockedSince !== undefined || res.writableNeedDrain) {
      client.pending = frame;
      client.blockedSince ??= Date.now();
      return;
    }
    if (!res.write(frame)) client.blockedSince = Date.now();
  }

  private sweep(): void {
    const now = Date.now();
    for (const channel of [...this.#channels.values()]) {
      for (const client of [...channel.clients]) {
        if (client.res.writableLength > this.#maxBuffered) this.drop(channel, client, "buffer cap");
        else if (client.blockedSince !== undefined && now - client.blockedSince > this.#stallMs)
          this.drop(channel, client, "not reading");
      }
    }
  }

  private async tick(channel: Channel): Promise<void> {
    if (!this.#channels.has(channel.path)) return;
    let frame: StreamFrame;
    try {
      frame = await this.read(channel.path);
    } catch (err) {
      this.logger.warn({ err, path: channel.path }, "dashboard read failed");
      frame = { event: "problem", data: JSON.stringify({ error: String(err), status: 500 }) };
    }
    if (this.#channels.get(channel.path) !== channel) return;
    const text = Buffer.from(`event: ${frame.event}\ndata: ${frame.data}\n\n`);
    if (channel.last === undefined || !text.equals(channel.last)) {
      channel.last = text;
      for (const client of channel.clients) this.deliver(client, text);
    } else if (++channel.ticks % Math.max(1, Math.round(15_000 / this.limits.pollMs)) === 0) {
      for (const client of channel.clients) this.deliver(client, client.pending ?? HEARTBEAT);
    }
    channel.timer = setTimeout(() => void this.tick(channel), this.limits.pollMs);
  }
}
