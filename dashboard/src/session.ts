// The signed-in token lives in this tab's sessionStorage only: never in a URL, a cookie or
// localStorage, gone when the tab closes or the user signs out.
const key = 'herald.token';

export const storedToken = (): string | null => window.sessionStorage.getItem(key);
export const storeToken = (token: string): void => window.sessionStorage.setItem(key, token);
export const forgetToken = (): void => window.sessionStorage.removeItem(key);
