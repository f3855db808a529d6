import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { streaming } from "./streaming.js";
const n = Number(process.argv[2] ?? 20000);
const slow = process.argv[3] ? { bytesPerTick: Number(process.argv[3]), tickMs: 10 } : undefined;
const r = await streaming(mkdtempSync(join(tmpdir(), "bs-")), n, slow);
console.log(r);
