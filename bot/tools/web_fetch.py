"""`web_fetch`: read a web page for the model, guarded against reaching private networks.

Only http(s) URLs are fetched. Every hop (the first URL and each redirect, followed by hand)
is checked: literal IP hosts directly, host names by `GuardedResolver`, which refuses the
whole DNS answer if any address is not public. aiohttp then connects to exactly the checked
addresses, so a second, different DNS answer (rebinding) never reaches a socket. Pages
become readable markdown via trafilatura, with a plain-text fallback. The registry's result
hook wraps the output as untrusted content; error results wrap what the remote side said
(status line, headers, redirect targets, error texts) themselves.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from bot import __version__
from bot.config import WebFetchConfig
from bot.tools.registry import Tool, ToolContext, ToolError, positive_int_arg
from bot.untrusted import marker_id_for, wrap_untrusted

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Returns why an address must not be reached, or None when it may be.
AddressCheck = Callable[[IPAddress], str | None]
ResolverFactory = Callable[[], AbstractResolver]

TOOL_NAME = "web_fetch"
ALLOWED_SCHEMES = frozenset({"http", "https"})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = f"Krill/{__version__} (web_fetch)"
READ_CHUNK_BYTES = 64 * 1024
# Extraction runs in a thread after the network part; the tool's own timeout allows for it.
EXTRACTION_GRACE_SECONDS = 30.0

# Cloud metadata services: AWS/GCP/Azure/OpenStack, AWS over IPv6, Alibaba.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
NAT64_PREFIX = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE_PREFIX = ipaddress.ip_network("::/96")
IPV4_MASK = 0xFFFFFFFF

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/javascript", "application/x-yaml"}
)


class FetchError(Exception):
    """A fetch that gave no page. The message is Krill's own words; `outside` holds what the
    remote side said (a status line, a header, a redirect target, an error text), which
    reaches the model only inside untrusted markers.
    """

    def __init__(self, message: str, outside: str = ""):
        super().__init__(message)
        self.outside = outside


class FetchRefused(FetchError):
    """The URL (or a redirect, or a DNS answer) points somewhere web_fetch must not go.

    Not an OSError on purpose: aiohttp would wrap that into a generic connection error.
    """


class FetchFailed(FetchError):
    """The remote side answered with an error, or with something web_fetch does not read."""


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 transition form carries (mapped, 6to4, NAT64, compatible)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in NAT64_PREFIX or (address in IPV4_COMPATIBLE_PREFIX and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & IPV4_MASK)
    return None


def blocked_reason(address: IPAddress) -> str | None:
    """Why `address` is off limits for web_fetch (a short noun phrase), or None if public."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return blocked_reason(embedded)
    if address in METADATA_ADDRESSES:
        return "cloud metadata address"
    if address.is_unspecified:
        return "unspecified address"
    if address.is_loopback:
        return "loopback address"
    if address.is_link_local:
        return "link-local address"
    if address.is_multicast:
        return "multicast address"
    if address.is_private:
        return "private address"
    if not address.is_global:
        return "non-public address"
    return None


def literal_address(host: str) -> IPAddress | None:
    """The IP address a URL host spells directly, or None for a host name."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def check_url(url: URL, check: AddressCheck | None) -> None:
    """Refuse non-http(s) URLs and, when `check` is set, literal non-public IP hosts.

    Host names are checked later, by the resolver, on the addresses actually used.
    """
    if url.scheme not in ALLOWED_SCHEMES:
        raise FetchRefused(f"only http and https URLs can be fetched, not {url.scheme or '?'!r}")
    if not url.host:
        raise FetchRefused("the URL has no host")
    address = literal_address(url.host)
    if check is not None and address is not None:
        reason = check(address)
        if reason:
            raise FetchRefused(f"{address} is a {reason}")


class GuardedResolver(AbstractResolver):
    """Resolves through `base` and refuses the answer if any address fails `check`."""

    def __init__(self, base: AbstractResolver, check: AddressCheck):
        self._base = base
        self._check = check

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        answers = await self._base.resolve(host, port, family)
        for answer in answers:
            address = literal_address(answer["host"])
            reason = "unparseable address" if address is None else self._check(address)
            if reason:
                # One bad address refuses the name: a mixed answer is a classic rebinding trick.
                raise FetchRefused(f"{host} resolves to a {reason} ({answer['host']})")
        return answers

    async def close(self) -> None:
        await self._base.close()


class _PageParser(HTMLParser):
    """The <title> and a plain-text rendering of a page, for when trafilatura finds nothing."""

    SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
    BLOCK = frozenset(
        {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self._in_title = False
        self._skip_depth = 0
        self._parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in self.SKIP:
            self._skip_depth += 1
        elif tag in self.BLOCK:
            self._parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self.SKIP and self._skip_depth:
            self._skip_depth -= 1
        elif tag in self.BLOCK:
            self._parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip_depth:
            self._parts.append(data)

    def text(self) -> str:
        lines = (" ".join(line.split()) for line in "".join(self._parts).split("\n"))
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def html_to_text(html: str, url: str) -> tuple[str, str]:
    """(title, readable text) of an HTML page: trafilatura markdown, else plain text."""
    import trafilatura  # heavy import, only needed once a page is fetched

    parser = _PageParser()
    parser.feed(html)
    parser.close()
    text = trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        favor_recall=True,
    )
    return " ".join(parser.title.split()), text or parser.text()


def _media_type(content_type: str, body: bytes) -> str:
    """'html', 'text', or '' for content web_fetch does not read."""
    if content_type in HTML_TYPES:
        return "html"
    if (
        content_type.startswith("text/")
        or content_type in TEXT_TYPES
        or content_type.endswith(("+json", "+xml"))
    ):
        return "text"
    if not content_type:  # no header: sniff
        head = body[:512].lstrip().lower()
        if head.startswith((b"<!doctype html", b"<html", b"<")):
            return "html"
        try:
            body[:4096].decode("utf-8")
        except UnicodeDecodeError:
            return ""
        return "text"
    return ""


@dataclass(frozen=True, slots=True)
class FetchedPage:
    url: str
    content_type: str
    title: str
    text: str
    body_truncated: bool


async def _read_capped(response: aiohttp.ClientResponse, max_bytes: int) -> tuple[bytes, bool]:
    """The body up to `max_bytes`, and whether there was more."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(READ_CHUNK_BYTES):
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            return b"".join(chunks)[:max_bytes], True
    return b"".join(chunks), False


class WebFetcher:
    """Fetches pages under `tools.web_fetch`; tests inject the DNS resolver and address check."""

    def __init__(
        self,
        config: WebFetchConfig,
        *,
        resolver_factory: ResolverFactory = aiohttp.DefaultResolver,
        address_check: AddressCheck = blocked_reason,
    ):
        self.config = config
        self.resolver_factory = resolver_factory
        self.address_check = address_check

    async def fetch(self, url: str) -> FetchedPage:
        """Fetch `url`, following redirects by hand; raises FetchRefused or ToolError."""
        check = None if self.config.allow_private else self.address_check
        base = self.resolver_factory()
        resolver = base if check is None else GuardedResolver(base, check)
        # No DNS cache: each connection resolves (and is checked) afresh. trust_env stays
        # off so an environment proxy cannot carry the request past the guard.
        connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False)
        timeout = aiohttp.ClientTimeout(total=self.config.timeout)
        headers = {"User-Agent": USER_AGENT, "Accept": "text/html,text/*;q=0.9,*/*;q=0.5"}
        try:
            async with (
                asyncio.timeout(self.config.timeout),
                aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers) as s,
            ):
                return await self._follow(s, URL(url), check)
        except TimeoutError:
            raise ToolError(f"fetching {url} timed out after {self.config.timeout:.0f}s") from None
        except aiohttp.ClientError as exc:
            raise FetchFailed(f"could not fetch {url}: {type(exc).__name__}", str(exc)) from None
        except ValueError as exc:  # yarl rejects malformed URLs
            raise ToolError(f"not a valid URL: {url!r} ({exc})") from None
        finally:
            await resolver.close()

    async def _follow(
        self, session: aiohttp.ClientSession, url: URL, check: AddressCheck | None
    ) -> FetchedPage:
        for hop in range(self.config.max_redirects + 1):
            try:
                check_url(url, check)
                response = await session.get(url, allow_redirects=False)
            except FetchRefused as exc:
                if hop == 0:
                    raise FetchRefused(f"the URL: {exc}", exc.outside) from None
                # The target came from the remote server's Location header.
                raise FetchRefused("a redirect", f"redirect to {url}: {exc}") from None
            async with response:
                if response.status in REDIRECT_STATUSES:
                    location = response.headers.get("Location")
                    if not location:
                        raise ToolError(f"HTTP {response.status} redirect without a Location")
                    url = url.join(URL(location))
                    continue
                return await self._page(url, response)
        raise ToolError(f"more than {self.config.max_redirects} redirects")

    async def _page(self, url: URL, response: aiohttp.ClientResponse) -> FetchedPage:
        if response.status >= 400:
            raise FetchFailed(
                f"the server answered HTTP {response.status}",
                f"HTTP {response.status} {response.reason or ''}\nURL: {url}",
            )
        body, truncated = await _read_capped(response, self.config.max_bytes)
        content_type = response.content_type if "Content-Type" in response.headers else ""
        kind = _media_type(content_type, body)
        if not kind:
            raise FetchFailed(
                "the response is not a web page or text, which is all web_fetch reads",
                f"Content-Type: {content_type or '(none; binary content)'}\nURL: {url}",
            )
        try:
            text = body.decode(response.charset or "utf-8", errors="replace")
        except LookupError:  # a charset Python does not know
            text = body.decode("utf-8", errors="replace")
        title = ""
        if kind == "html":
            title, text = await asyncio.to_thread(html_to_text, text, str(url))
        return FetchedPage(str(url), content_type, title, text, truncated)


def render_page(page: FetchedPage, max_chars: int, max_bytes: int) -> str:
    """The tool's text: a short header (title, final URL, truncation notes), then the text."""
    lines = [f"Title: {page.title or '(none)'}", f"URL: {page.url}"]
    if page.content_type:
        lines.append(f"Content-Type: {page.content_type}")
    if page.body_truncated:
        lines.append(f"[The response was over {max_bytes:,} bytes; only the start was read.]")
    text = page.text
    if len(text) > max_chars:
        lines.append(f"[Showing the first {max_chars:,} of {len(text):,} characters.]")
        text = text[:max_chars]
    return "\n".join(lines) + "\n\n" + text


def with_outside(
    text: str, outside: str, url: str, ctx: ToolContext, *, source: str = TOOL_NAME
) -> str:
    """An error text with what the remote side (at `url`) said appended inside untrusted
    markers naming `source`."""
    if not outside:
        return text
    marker = marker_id_for(f"{ctx.turn_id}:{source}:{url}")
    details = wrap_untrusted(outside, source=source, marker_id=marker)
    return f"{text} What the remote server said:\n{details}"


class WebFetchTool:
    """The `web_fetch` tool: argument checks around `WebFetcher`."""

    def __init__(self, fetcher: WebFetcher):
        self.fetcher = fetcher
        self.config = fetcher.config

    async def handle(self, args: dict[str, Any], ctx: ToolContext) -> str:
        url = args.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ToolError("url is required")
        max_chars = min(
            positive_int_arg(args, "max_chars", self.config.max_chars), self.config.max_chars
        )
        try:
            page = await self.fetcher.fetch(url.strip())
        except FetchRefused as exc:
            log.info("web_fetch refused %s: %s %s", url, exc, exc.outside)
            text = f"refused: {exc}. web_fetch only reaches public internet addresses."
            raise ToolError(with_outside(text, exc.outside, url, ctx)) from None
        except FetchFailed as exc:
            raise ToolError(with_outside(f"{exc}.", exc.outside, url, ctx)) from None
        return render_page(page, max_chars, self.config.max_bytes)

    def tool(self) -> Tool:
        return Tool(
            name=TOOL_NAME,
            description=(
                "Fetch a web page (http or https) and return its title, final URL and readable "
                "text as markdown. Use it to read links people share. Local and private "
                "network addresses are refused."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "The http(s) URL to fetch."},
                    "max_chars": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": self.config.max_chars,
                        "description": "Return at most this many characters of text.",
                    },
                },
                "required": ["url"],
            },
            handler=self.handle,
            timeout=self.config.timeout + EXTRACTION_GRACE_SECONDS,
            untrusted_source=TOOL_NAME,
        )
