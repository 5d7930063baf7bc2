// Package dns is the DNS resolver cairnd runs for each sandbox, the one
// place where the sandbox's domain rules are enforced: a name the Policy
// denies gets NXDOMAIN at once and never reaches the upstream; any other
// query is forwarded to the upstream resolver and its answer returned; for
// a name the Policy allows, every address of the answer is handed to
// Config.Resolved before the answer is sent, so that the caller can open
// that address (an nftables set) by the time the guest connects to it.
//
// Queries come from untrusted code, so every byte is checked
// (golang.org/x/net/dns/dnsmessage parses them) and nothing but the fields
// a query needs goes upstream: the resolver builds the upstream query
// itself (its own random id, the one question, RD/CD/AD, an OPT record with
// the DO bit when the guest sent one) from a fresh socket, and takes only
// an answer with that id and that question. Bytes without a DNS header,
// and responses, get no answer; a query with other than one question,
// answer or authority records, additional records other than one OPT, or
// over 4096 bytes gets FORMERR; an opcode other than QUERY gets NOTIMP;
// a class other than IN or a zone transfer gets REFUSED; an EDNS version
// other than 0 gets BADVERS.
//
// One sandbox flooding its resolver costs cairnd a bounded amount: at most
// MaxInFlight queries are worked on at once over UDP and TCP together (a
// query beyond that gets SERVFAIL at once), at most 16 TCP connections are
// open (one more is closed on accept), each must send a whole query within
// 10 s and read each answer within 5 s, and an upstream exchange ends with
// SERVFAIL after Config.Timeout. docs/networking-dns.md says the same for
// users of the package.
package dns
