import type { HandleClientError } from '@sveltejs/kit';

/**
 * Errors while opening a page in the browser. A route the dashboard does not have is not a
 * fault (the 404 page says so in the product's words), so only other errors reach the console.
 */
export const handleError: HandleClientError = ({ error, status }) => {
  if (status !== 404) console.error(error);
  return { message: status === 404 ? 'Not found' : 'Something went wrong' };
};
