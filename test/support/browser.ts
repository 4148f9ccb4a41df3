// Headless Chromium for the tests of pages: Debian's `chromium` (`make browser` installs it) driven
// by playwright-core, which never downloads a browser. Every request a page makes to a host other
// than this machine is aborted and recorded, and so are its console errors, so that a test can
// assert that a page needs nothing from the internet and runs clean.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';

const localHosts = new Set(['127.0.0.1', 'localhost', '[::1]']);
const isLocal = (url: URL) => !['http:', 'https:', 'ws:', 'wss:'].includes(url.protocol) || localHosts.has(url.hostname);

const screenshotsDir = new URL('../../reports/screenshots/', import.meta.url);

export function chromiumPath(): string {
  try {
    return execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error("Chromium is not installed: `make browser` installs Debian's chromium package (as root).");
  }
}

export type HeadlessBrowser = {
  /** Each request to another host, aborted before it left: its URL. */
  blocked: string[];
  /** Console errors and uncaught exceptions of every page, with the page's URL. */
  errors: string[];
  context: BrowserContext;
  newPage(): Promise<Page>;
  /** Screenshots every open page as reports/screenshots/failed-<name>-<n>.png (after a failed test). */
  keepFailure(name: string): Promise<void>;
  close(): Promise<void>;
};

/**
 * `serviceWorkers: 'allow'` lets pages register service workers (the Web Push test); by default
 * they are blocked, so that no page is served from a worker's cache.
 */
export async function launchBrowser(options: { serviceWorkers?: 'allow' | 'block' } = {}): Promise<HeadlessBrowser> {
  const browser: Browser = await chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    // Tests run as root in a container: no sandbox there, and /dev/shm is often 64 MB.
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, serviceWorkers: options.serviceWorkers ?? 'block' });
  const blocked: string[] = [];
  const errors: string[] = [];
  await context.route(
    (url) => !isLocal(url),
    (route) => {
      blocked.push(route.request().url());
      return route.abort('blockedbyclient');
    },
  );
  await context.routeWebSocket(
    (url) => !isLocal(url),
    (socket) => {
      blocked.push(socket.url());
      return socket.close();
    },
  );
  context.on('page', (page) => {
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(`${page.url()}: ${message.text()}`);
    });
    page.on('pageerror', (error) => errors.push(`${page.url()}: ${error.message}`));
  });
  return {
    blocked,
    errors,
    context,
    newPage: () => context.newPage(),
    async keepFailure(name) {
      const slug = name.replace(/[^a-z0-9]+/gi, '-').slice(0, 80);
      for (const [index, page] of context.pages().entries()) await screenshot(page, `failed-${slug}-${index}`).catch(() => undefined);
    },
    close: () => browser.close(),
  };
}

/**
 * Saves the whole page, or one element of it, to reports/screenshots/<name>.png (CI keeps reports/)
 * and returns the file's path.
 */
export async function screenshot(target: Page | Locator, name: string): Promise<string> {
  mkdirSync(screenshotsDir, { recursive: true });
  const file = new URL(`${name}.png`, screenshotsDir).pathname;
  await ('goto' in target ? target.screenshot({ path: file, fullPage: true }) : target.screenshot({ path: file }));
  return file;
}

/** The widths every view must work at: a phone's and a laptop's. */
export const viewWidths = [
  { width: 390, height: 844 },
  { width: 1280, height: 800 },
] as const;
/** The least height of a control a finger must hit, at a phone's width. */
export const touchTargetPx = 44;

/**
 * Shows the page at each of `viewWidths` and, at each, waits for `ready`, then fails when the page
 * scrolls sideways, when a control of a phone's width is shorter than `touchTargetPx`, or when the
 * page logged a console error (one allowed by `allowedErrors` aside); and saves the viewport as
 * reports/screenshots/views/<name>-<width>.png (docs/screenshots/ holds a copy). `show` is scrolled into view before the picture, if given.
 */
export async function checkViewAtWidths(
  browser: HeadlessBrowser,
  page: Page,
  name: string,
  ready: () => Promise<unknown>,
  options: { show?: Locator; allowedErrors?: RegExp } = {},
): Promise<void> {
  for (const size of viewWidths) {
    await page.setViewportSize(size);
    await ready();
    await options.show?.evaluate((element) => element.scrollIntoView({ block: 'start' }));
    const sideways = await page.evaluate(() => {
      const root = document.scrollingElement!;
      return root.scrollWidth > root.clientWidth ? `${root.scrollWidth} px wide in a ${root.clientWidth} px window` : null;
    });
    expect({ view: name, width: size.width, sideways }).toEqual({ view: name, width: size.width, sideways: null });
    if (size.width < 640) {
      const small = await page.evaluate((least) => {
        const controls = document.querySelectorAll<HTMLElement>('button, select, input:not([type=checkbox]):not([type=radio]), .top nav a, label.choice');
        return Array.from(controls)
          .filter((control) => control.offsetParent !== null && control.getBoundingClientRect().height < least)
          .map((control) => `${control.tagName.toLowerCase()} "${(control.innerText || control.getAttribute('aria-label') || '').trim()}": ${control.getBoundingClientRect().height} px`);
      }, touchTargetPx);
      expect({ view: name, small }).toEqual({ view: name, small: [] });
    }
    const errors = browser.errors.filter((line) => !options.allowedErrors?.test(line));
    expect({ view: name, width: size.width, errors }).toEqual({ view: name, width: size.width, errors: [] });
    const views = new URL('views/', screenshotsDir);
    mkdirSync(views, { recursive: true });
    await page.screenshot({ path: new URL(`${name}-${size.width}.png`, views).pathname });
  }
}
