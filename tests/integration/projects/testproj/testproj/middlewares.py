from twisted.internet import reactor, task


class DelayMiddleware:
    """Holds a request with meta["delay"] (seconds) in the downloader without
    blocking the reactor: it counts as in flight, so a graceful stop waits for
    it while signals and other requests are still handled."""

    def process_request(self, request, spider):
        delay = float(request.meta.get("delay") or 0)
        if delay > 0:
            return task.deferLater(reactor, delay, lambda: None)
        return None
