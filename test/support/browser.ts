/**
 * Test support: the distribution's headless Chromium (Debian package `chromium`, which `.ci/run` installs when
 * absent) driven by playwright-core, and screenshot checks done on the decoded pixels.
 *
 * `CHROMIUM_PATH` overrides where the browser is looked for. A missing browser fails the test with the command that
 * installs it (it is never skipped: the dashboard's must-show is a real browser).
 */
import { existsSync } from "node:fs";
import { chromium, type Browser, type Page } from "playwright-core";

const CANDIDATES = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/lib/chromium/chromium"];

/** The Chromium executable, or throws naming the package to install. */
export function chromiumPath(): string {
  const found = [process.env.CHROMIUM_PATH, ...CANDIDATES].find(
    (p): p is string => p !== undefined && p !== "" && existsSync(p),
  );
  if (found === undefined) {
    throw new Error(
      "No Chromium found (looked in $CHROMIUM_PATH and /usr/bin): install it with `apt-get install chromium` (.ci/run does).",
    );
  }
  return found;
}

/** Launches headless Chromium (no sandbox: tests run as root in CI). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
    timeout: 60_000,
  });
}

/** A colour as `#rrggbb`. */
export type Hex = string;

/**
 * The most frequent colour inside each rectangle (CSS pixels, viewport coordinates) of a PNG screenshot taken at
 * device scale factor 1, each rectangle shrunk by `inset` pixels so borders and anti-aliasing do not count. The PNG is
 * decoded by the browser itself (an <img> drawn on a canvas), so the check needs no image library.
 */
export async function dominantColours(
  page: Page,
  png: Buffer,
  rects: { x: number; y: number; width: number; height: number }[],
  inset = 5,
): Promise<Hex[]> {
  const args = JSON.stringify({ b64: png.toString("base64"), boxes: rects, pad: inset });
  // Runs in the page (plain JavaScript: the test project is type-checked without the DOM library).
  return page.evaluate(`(${DOMINANT_IN_PAGE})(${args})`) as Promise<Hex[]>;
}

const DOMINANT_IN_PAGE = `async ({ b64, boxes, pad }) => {
  const img = new Image();
  img.src = "data:image/png;base64," + b64;
  await img.decode();
  const canvas = document.createElement("canvas");
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const g = canvas.getContext("2d");
  g.drawImage(img, 0, 0);
  return boxes.map((r) => {
    const x = Math.round(r.x + pad), y = Math.round(r.y + pad);
    const w = Math.max(1, Math.round(r.width - 2 * pad)), h = Math.max(1, Math.round(r.height - 2 * pad));
    const data = g.getImageData(x, y, w, h).data;
    const counts = new Map();
    for (let i = 0; i < data.length; i += 4) {
      const hex = "#" + [data[i], data[i + 1], data[i + 2]].map((v) => v.toString(16).padStart(2, "0")).join("");
      counts.set(hex, (counts.get(hex) || 0) + 1);
    }
    return [...counts.entries()].sort((a, b) => b[1] - a[1])[0][0];
  });
}`;
