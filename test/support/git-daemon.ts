/**
 * A `git://` server on 127.0.0.1 in front of a folder of bare repositories, for the remote-timeout tests (issue 33):
 * each connection is served by its own `git daemon --inetd` (upload-pack and receive-pack, so the repositories'
 * hooks run as for any push), and `hang(true)` makes it a remote that accepts connections and never answers a byte
 * (what a stuck server, a black-holed proxy or a frozen ssh looks like to git). `held()` counts the connections
 * accepted while hanging that the client side has not closed yet: 0 after a timeout means the client git is gone.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer, type Server, type Socket } from "node:net";

export interface GitDaemon {
  /** The git:// URL of the bare repository `name` (a folder under the base path). */
  url(name: string): string;
  /** While on, new connections are accepted and left silent. */
  hang(on: boolean): void;
  /** Connections accepted while hanging, in all. */
  hung(): number;
  /** Of those, the ones still open. */
  held(): number;
  close(): Promise<void>;
}

/** Starts the server for the bare repositories directly under `basePath`. */
export async function startGitDaemon(basePath: string): Promise<GitDaemon> {
  let hanging = false;
  let hungCount = 0;
  const held = new Set<Socket>();
  const daemons = new Set<ChildProcess>();
  const server: Server = createServer((socket) => {
    socket.on("error", () => {});
    if (hanging) {
      hungCount += 1;
      held.add(socket);
      socket.on("close", () => held.delete(socket));
      socket.resume(); // read (and drop) the request, so the client's close is seen
      return;
    }
    const daemon = spawn(
      "git",
      ["daemon", "--inetd", "--export-all", "--enable=receive-pack", `--base-path=${basePath}`, basePath],
      { stdio: ["pipe", "pipe", "ignore"] },
    );
    daemons.add(daemon);
    daemon.on("exit", () => {
      daemons.delete(daemon);
      socket.end();
    });
    daemon.stdin.on("error", () => {});
    socket.pipe(daemon.stdin);
    daemon.stdout.pipe(socket);
    socket.on("close", () => daemon.stdin.end());
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: (name) => `git://127.0.0.1:${port}/${name}`,
    hang(on) {
      hanging = on;
    },
    hung: () => hungCount,
    held: () => held.size,
    async close() {
      for (const s of held) s.destroy();
      for (const d of daemons) d.kill("SIGKILL");
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}
