// Swagger UI over the daemon's own OpenAPI document; "Try it out" sends its
// requests to this origin (the document's server is "/"), with the browser's
// basic-auth credentials.
window.ui = SwaggerUIBundle({
  url: '/api/v1/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  tryItOutEnabled: true,
  displayRequestDuration: true,
  filter: true,
  validatorUrl: null,
  requestInterceptor: (req) => { req.credentials = 'same-origin'; return req; },
});
