/* Which listening addresses only this machine reaches.
 *
 * spiderd serves without authentication only on loopback (main.c), and
 * keeps the last admin credential of a node that serves beyond it
 * (api/ops_auth.c): both ask addr_loopback about [scrapyd]
 * bind_address; the failed-login throttle asks addr_loopback_numeric about
 * a client's address (http/trust.c). A wrong "yes" opens the node to the
 * network, so anything not plainly loopback is "no".
 *
 * Pure functions but for the one name resolved ("localhost"); no state.
 */
#ifndef SPIDERD_ADDR_H
#define SPIDERD_ADDR_H

/* Is addr a numeric address in 127.0.0.0/8, ::1, or an IPv4-mapped
 * ::ffff:127.x.y.z, as inet_pton reads it (dotted quad, no leading zeros,
 * no zone); "[::1]" (brackets, as bind_address takes them) too? 1 or 0;
 * "", NULL, "127", "127.1", "127.evil.example" and every name are 0. */
int addr_loopback_numeric(const char *addr);

/* addr_loopback_numeric, and "localhost" when the resolver (with the
 * hints the HTTP server binds with) gives loopback addresses only, and at
 * least one: the server binds what the resolver says, so /etc/hosts
 * decides. Other names are 0: what they resolve to may change after the
 * check. 1 or 0. */
int addr_loopback(const char *addr);

#endif
