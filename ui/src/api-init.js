// Swagger UI over the daemon's own OpenAPI document; "Try it out" sends its
// requests to this origin, with the browser's basic-auth credentials. The
// page is at <prefix>/api/: the document's server is "/" and its paths are
// absolute (/api/v1/...), so a reverse proxy's prefix is put back in front
// of them here.
const root = new URL('..', location.href).pathname; // "/" or "/prefix/"
window.ui = SwaggerUIBundle({
  url: 'v1/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  tryItOutEnabled: true,
  displayRequestDuration: true,
  filter: true,
  validatorUrl: null,
  requestInterceptor: (req) => {
    const u = new URL(req.url, location.href);
    if (root !== '/' && u.origin === location.origin && !u.pathname.startsWith(root)) {
      u.pathname = root + u.pathname.replace(/^\//, '');
      req.url = u.href;
    }
    req.credentials = 'same-origin';
    return req;
  },
});
