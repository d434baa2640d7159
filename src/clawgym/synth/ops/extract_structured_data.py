"""extract_structured_data: pull named fields out of messy semi-structured sources (a folder of scanned
receipts as text, order-confirmation emails, a saved HTML page with a table; or the previous step's messages or
document) into a CSV, and for some tasks also a JSON array of records with typed numbers."""

from __future__ import annotations

import datetime as dt
import html
import json
import re
from dataclasses import dataclass
from email.utils import parseaddr, parsedate_to_datetime

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _data_vocab as V
from clawgym.synth.ops import operation
from clawgym.synth.ops._tables import digest, money, refer
from clawgym.synth.ops.base import (
    DOCUMENT,
    MESSAGES,
    RECORDS,
    TABLE,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    exec_,
    ls,
    read,
    to_csv,
    write,
)

DATE_FORMATS = ["%d %b %Y", "%b %d, %Y", "%Y-%m-%d", "%d.%m.%Y", "%A %d %B %Y"]


def _json(records) -> str:
    return json.dumps(records, indent=2, ensure_ascii=False) + "\n"


def _typed(header: list[str], rows: list[list[str]], numeric: set[str]) -> list[dict]:
    out = []
    for r in rows:
        rec = {}
        for h, v in zip(header, r, strict=True):
            if h in numeric:
                f = float(v)
                rec[h] = int(f) if f.is_integer() and "." not in v else f
            else:
                rec[h] = v
        out.append(rec)
    return out


def parse_when(value) -> dt.date | None:
    s = str(value or "").strip()
    if not s:
        return None
    try:
        return dt.date.fromisoformat(s[:10])
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(s).date()
    except (TypeError, ValueError, IndexError):
        return None


def md_table(text: str) -> tuple[list[str], list[list[str]]] | None:
    """The first markdown pipe table of a document, if it is plain (no inline markup in its cells)."""
    lines = text.splitlines()
    for i in range(len(lines) - 1):
        head, sep = lines[i].strip(), lines[i + 1].strip()
        if head.startswith("|") and re.fullmatch(r"\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?", sep):
            def cells(line):
                return [c.strip() for c in line.strip().strip("|").split("|")]
            header = cells(head)
            rows = []
            for line in lines[i + 2:]:
                if not line.strip().startswith("|"):
                    break
                c = cells(line)
                if len(c) != len(header):
                    return None
                rows.append(c)
            flat = header + [c for r in rows for c in r]
            if not rows or any(re.search(r"[*`\[\]<>]", c) for c in flat) or any(not h for h in header):
                return None
            if len({h.casefold() for h in header}) != len(header) or len(header) < 2:
                return None
            return header, rows
    return None


def md_pairs(text: str) -> list[tuple[str, str]]:
    """`- key: value` bullet lines of a document (outside code fences); [] when keys repeat or carry markup."""
    out, fence, seen = [], False, set()
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fence = not fence
            continue
        m = re.match(r"^\s*[-*]\s+([^:]{1,40}?)\s*:\s+(\S.*?)\s*$", line)
        if m and not fence:
            k, v = m.group(1).strip(), m.group(2).strip()
            if re.search(r"[*`\[\]<>|]", k + v) or k.casefold() in seen or not k:
                return []
            seen.add(k.casefold())
            out.append((k, v))
    return out


def md_headings(text: str) -> list[tuple[int, str]]:
    out, fence = [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fence = not fence
            continue
        m = re.match(r"^(#{1,6})\s+(.+?)\s*#*\s*$", line)
        if m and not fence:
            out.append((len(m.group(1)), m.group(2).strip()))
    return out


def _fields(rng, parts: list[tuple[str, list[str]]]) -> str:
    """What each column holds, `parts` = (column, noun-phrase templates), laid out in one of several structurally
    different ways (a parenthesis per column, "x in `col`", "`col`: x; ...", "`col` = x"); the names stay verbatim."""
    items = [(f"`{c}`", expand(rng.choice(ds), rng, clause=True) if ds else "") for c, ds in parts]
    style = rng.choice(["paren", "into", "colon", "equals"])
    if style == "paren":
        out = [f"{c} ({d})" if d else c for c, d in items]
    elif style == "into":
        out = [f"{d} in {c}" if d else c for c, d in items]
    elif style == "colon":
        return "; ".join(f"{c}: {d}" if d else c for c, d in items)
    else:
        out = [f"{c} = {d}" if d else c for c, d in items]
    return ", ".join(out[:-1]) + " and " + out[-1]


def _order(rng, d: str, f: str) -> str:
    """How the rows are ordered (by the date column `d`, then `f`), as a participle phrase."""
    return expand(rng.choice([
        "[sorted|ordered] by {d}[, then| and then by|, ties by] {f}",
        "in {d} order[, {f} breaking ties| (ties: {f})]",
        "[going|running] from the earliest {d} to the latest[, then by {f}| ({f} for ties)]",
        "[arranged|listed] by {d} and [within a day|on the same date] by {f}",
    ]), rng, clause=True, d=d, f=f)


@dataclass
class _Found:
    """The data stage of a standalone variant: the workspace files and the rows they hold."""

    files: list[WorkspaceFile]
    rows: list[list[str]]  # in the order the output wants them
    folder: str  # the files' folder ("" for a single file)
    base: str = ""  # receipts: the persona's folder the scans are in ("" for none)
    source: str = ""  # the web page: the supplier it is from


@dataclass
class _Request:
    """The phrasing stage: the JSON copy's path (None when not asked for), its records, the request."""

    jpath: str | None
    records: list[dict]
    instruction: str


@operation
class ExtractStructuredData(OperationGenerator):
    id = "extract_structured_data"
    consumes: tuple[str, ...] = (DOCUMENT, MESSAGES)
    produces = (TABLE, RECORDS)
    standalone = True
    folder_scoped = True

    # ----------------------------------------------------------------------------------------- data: standalone
    @staticmethod
    def _receipt_scans(ctx: OpContext) -> _Found:
        """4-8 receipts of 2-4 vendors in one month, as OCR text files in a folder (a vendor's name in capitals or
        not, a date in one of DATE_FORMATS, items, tax, total, payment), and their rows: file, vendor, ISO date,
        total."""
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        base = V.folder(ctx.persona, rng, ["receipts", "scans", "paperwork", "expenses"]) if rng.random() < 0.5 else ""
        folder = ctx.path(V.join(base, rng.choice(["receipts", "scanned_receipts", "receipts_2026", "ocr", "till_slips",
                                                   f"receipts_{V.month_name(1 + rng.randrange(12))[:3].lower()}",
                                                   "scans", "shoebox"])))
        n = rng.randint(4, 8)
        vendors = flavor.orgs(rng, rng.randint(2, min(4, n - 1)))
        month = rng.randint(1, 12)
        files, rows = [], []
        names = rng.choice([
            [f"receipt_{i + 1:02d}.txt" for i in range(n)],
            [f"scan_{1000 + rng.randint(0, 80) * 10 + i}.txt" for i in range(n)],
            [f"IMG_{2200 + i * 3}_ocr.txt" for i in range(n)],
        ])
        for i in range(n):
            vendor = vendors[i] if i < len(vendors) else rng.choice(vendors)
            d = flavor.date_in(rng, 2026, month)
            items = [(it, rng.randint(1, 4), flavor.amount(rng, 1.5, 60))
                     for it in rng.sample(voc["items"], rng.randint(1, 4))]
            sub = round(sum(q * p for _, q, p in items), 2)
            rate = rng.choice([0, 5, 7, 10, 20])
            tax = round(sub * rate / 100, 2)
            total = round(sub + tax, 2)
            when = d.strftime(rng.choice(DATE_FORMATS))
            cur = rng.choice(["", "$", "EUR ", "€"])
            upper = rng.random() < 0.5
            lines = [f"   {vendor.upper() if upper else vendor}",
                     f"   {rng.randint(1, 200)} {rng.choice(flavor.ORG_WORDS)} {rng.choice(['Rd', 'St', 'Ave'])}, "
                     f"{rng.choice(flavor.CITIES)}",
                     f"Tel {rng.randint(200, 999)}-{rng.randint(1000, 9999)}", ""]
            lines.append(rng.choice([f"Date: {when}", f"{when}  {rng.randint(8, 20):02d}:{rng.randint(0, 59):02d}",
                                     f"Sale date {when}"]))
            lines.append(f"Receipt #{rng.randint(10000, 99999)}")
            lines.append("-" * 28)
            for it, q, p in items:
                label = f"{it} x{q}" if q > 1 else it
                lines.append(f"{label:<18}{cur}{q * p:>8.2f}")
            lines.append("-" * 28)
            lines.append(f"{'SUBTOTAL':<18}{cur}{sub:>8.2f}")
            if rate:
                lines.append(f"{'TAX ' + str(rate) + '%':<18}{cur}{tax:>8.2f}")
            lines.append(f"{rng.choice(['TOTAL', 'Total', 'TOTAL DUE', 'Amount paid']):<18}{cur}{total:>8.2f}")
            lines += [rng.choice(["Paid: VISA ****" + str(rng.randint(1000, 9999)), "Paid: CASH",
                                  "Paid: MASTERCARD contactless"]), "", rng.choice(["Thank you!", "THANK YOU - COME AGAIN",
                                                                                    "Keep this receipt for returns"])]
            if rng.random() < 0.3:
                lines.insert(rng.randint(4, 6), "")
            path = f"{folder}/{names[i]}"
            files.append(WorkspaceFile(path=path, content="\n".join(lines) + "\n"))
            rows.append([names[i], vendor, d.isoformat(), money(total)])
        rows.sort(key=lambda r: (r[2], r[0]))
        return _Found(files, rows, folder, base=base)

    def _receipts(self, ctx: OpContext) -> dict:
        """The receipts variant: the scans, then the output's columns and path and how the request names the
        fields."""
        rng = ctx.rng
        found = self._receipt_scans(ctx)
        files, rows, folder, base = found.files, found.rows, found.folder, found.base
        fc, vc, dc, tc = (rng.choice(c) for c in (["file", "filename", "source_file", "receipt_file"],
                                                  ["vendor", "shop", "merchant", "store"],
                                                  ["date", "purchase_date", "receipt_date", "bought_on"],
                                                  ["total", "amount_paid", "total_paid", "grand_total"]))
        header = [fc, vc, dc, tc]
        out = ctx.path(V.join(rng.choice(["", "", base]), rng.choice(
            ["receipts.csv", "receipt_totals.csv", "expenses_from_receipts.csv", "receipt_index.csv", "slips.csv",
             "receipts_table.csv"])))
        what = expand("the scanned receipts in `{f}/` ([one text file each|a text file per receipt], OCR output; "
                      "{df})", rng, f=folder, df=V.day_first(rng))
        what = what[:1].lower() + what[1:]
        fields = _fields(rng, [
            (fc, ["the receipt's file name", "the name of the text file", "which file it came from",
                  "the receipt's text file", "the receipt's own file name"]),
            (vc, ["the [shop|store] name at the top", "the [shop|store] printed at the top",
                  "who sold it, as printed at the top", "the [merchant|seller] from the receipt's first line",
                  "the [business|shop] name [heading|printed on] the slip"]),
            (dc, ["the purchase date, YYYY-MM-DD style", "the purchase date in ISO form", "the day of purchase, "
                  "year-month-day (2026-03-05)", "the date it was bought, written like 2026-03-05", "when it was bought, in "
                  "year-month-day form", "the [receipt|purchase] date as an ISO date"]),
            (tc, [f"[the final amount paid, after tax|the total actually paid, tax included|what was paid in the end, "
                  f"tax included], as {V.plain2(rng)}",
                  f"the amount paid [with|including] tax, {V.plain2(rng)}",
                  f"the [bottom-line|grand] total incl. tax, {V.plain2(rng)}",
                  f"[how much|what] [the receipt came to|I paid] [with tax|after tax] - {V.plain2(rng)}"]),
        ])
        return dict(files=files, header=header, rows=rows, out=out, what=what, fields=fields, folder=folder,
                    key=fc, path_key=True, numeric={tc},
                    order=_order(rng, dc, fc),
                    roles={"date": dc, "name": vc, "group": vc, "value": tc},
                    reads=[read(f.path) for f in files[:3]], label="receipts", unit="receipt")

    @staticmethod
    def _order_mails(ctx: OpContext) -> _Found:
        """3-6 order confirmations of 2-4 shops in one month and 1-2 newsletters, as .eml files in a folder, and
        the orders' rows: order number without #, shop, ISO date, total with shipping."""
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        folder = ctx.path(V.join(V.folder(ctx.persona, rng, ["mail", "inbox", "email"]) if rng.random() < 0.4 else "",
                                 rng.choice(["order_mails", "inbox_orders", "mail/orders", "confirmations",
                                             "shop_emails", "purchases_mail", "saved_mail"])))
        n = rng.randint(3, 6)
        vendors = flavor.orgs(rng, rng.randint(2, min(4, n - 1)))
        me = ctx.persona.name
        my_addr = flavor.email_of(me, "mail.example")
        month = rng.randint(1, 12)
        files, rows = [], []
        msgs = []
        for i in range(n):
            vendor = vendors[i] if i < len(vendors) else rng.choice(vendors)
            d = flavor.date_in(rng, 2026, month)
            oid = f"{rng.choice(['A', 'SO', 'ORD-', '#'])}{rng.randint(10000, 99999)}"
            items = [(it, rng.randint(1, 5), flavor.amount(rng, 2, 80))
                     for it in rng.sample(voc["items"], rng.randint(1, 3))]
            sub = round(sum(q * p for _, q, p in items), 2)
            ship = rng.choice([0.0, 4.95, 7.5, 12.0])
            total = round(sub + ship, 2)
            oid_clean = oid.lstrip("#")
            body = [f"Hi {me.split()[0]},", "",
                    rng.choice(["Thanks for your order!", "We've received your order and are getting it ready.",
                                "Your order is confirmed."]), "",
                    f"Order number: {oid}", f"Order date: {d.strftime(rng.choice(DATE_FORMATS))}", "", "Items:"]
            body += [f"  {q} x {it} @ {p:.2f} = {q * p:.2f}" for it, q, p in items]
            body += ["", f"Subtotal: {sub:.2f}", f"Shipping: {ship:.2f}" if ship else "Shipping: free",
                     f"Order total: {rng.choice(['', '$', 'EUR '])}{total:,.2f}", "",
                     "You'll get another email when it ships.", "", f"-- {vendor} customer care"]
            slug = flavor.slug(vendor).replace("_", "")
            msgs.append((d, dict(sender=f"{vendor} <orders@{slug}.example>", subject=rng.choice(
                [f"Order confirmation {oid}", f"Your {vendor} order {oid}", f"We got your order ({oid})"]),
                body="\n".join(body))))
            rows.append([oid_clean, vendor, d.isoformat(), money(total)])
        for _ in range(rng.randint(1, 2)):
            d = flavor.date_in(rng, 2026, month)
            org = rng.choice(vendors)
            slug = flavor.slug(org).replace("_", "")
            msgs.append((d, dict(sender=f"{org} <news@{slug}.example>",
                                 subject=rng.choice(["Spring sale: 20% off everything", "Our new catalogue is here",
                                                     "Tips for your next order"]),
                                 body=f"Hi {me.split()[0]},\n\nOrders over 50.00 ship free this month. Use code "
                                      f"SAVE{rng.randint(10, 30)} at checkout.\n\n-- {org}")))
        rng.shuffle(msgs)
        for i, (d, m) in enumerate(msgs):
            params = {"from": m["sender"], "to": my_addr, "subject": m["subject"],
                      "date": f"{d.isoformat()}T{rng.randint(7, 21):02d}:{rng.randint(0, 59):02d}:00", "body": m["body"]}
            files.append(WorkspaceFile(path=f"{folder}/{i + 1:03d}.eml", generate=GeneratedContent(kind="eml",
                                                                                                   params=params)))
        rows.sort(key=lambda r: (r[2], r[0]))
        return _Found(files, rows, folder)

    def _orders(self, ctx: OpContext) -> dict:
        """The order emails variant: the emails, then the output's columns and path and how the request names the
        fields."""
        rng = ctx.rng
        found = self._order_mails(ctx)
        files, rows, folder = found.files, found.rows, found.folder
        oc, vc, dc, tc = (rng.choice(c) for c in (["order_id", "order_number", "order_ref", "order"],
                                                  ["vendor", "shop", "seller", "retailer"],
                                                  ["date", "order_date", "ordered_on"],
                                                  ["total", "order_total", "amount", "paid"]))
        header = [oc, vc, dc, tc]
        out = ctx.path(rng.choice(["orders.csv", "order_log.csv", "purchases.csv", "online_orders.csv",
                                   "order_summary.csv", "what_i_ordered.csv"]))
        what = expand(rng.choice([
            "the emails saved in `{f}/` ([skip|ignore] anything that is not an order confirmation, such as "
            "[newsletters|promotions|marketing mail]; {df})",
            "the [mails|messages] [in|under] `{f}/` - only the order confirmations count, [the|any] [newsletters|"
            "promotions|marketing mail] [do not|don't] ({df})",
            "the order confirmations among the emails in `{f}/` ([leave out|pass over] [newsletters|promotions|"
            "marketing mail] and [the like|similar]; {df})",
            "`{f}/`'s emails[, which also hold [newsletters|promotions|marketing mail]|] - [I only care about|use "
            "only] the [order confirmations|confirmations of orders] ({df})",
        ]), rng, f=folder, df=V.day_first(rng))
        what = what[:1].lower() + what[1:]
        fields = _fields(rng, [
            (oc, ["the order number without any leading #", "the order's number, minus the leading #",
                  "the order number with the # stripped", "the [bare|plain] order number, no #",
                  "the number of the order, dropping its #"]),
            (vc, ["the shop's name as in the sender", "the seller, named as in the From line",
                  "who sent it, the shop's name as in the sender", "the [store|shop] as the From line names it",
                  "the [sending|selling] shop's display name"]),
            (dc, ["the order date, YYYY-MM-DD", "the date of the order, YYYY-MM-DD", "the day the order was placed, "
                  "year first, 2026-03-05 style", "when it was ordered, as an ISO date", "the order's date in "
                  "year-month-day form"]),
            (tc, [f"[the order total including shipping|the full total, shipping included|what the order came to "
                  f"with shipping], {V.plain2(rng)}",
                  f"the total with [postage|delivery|shipping] added, {V.plain2(rng)}",
                  f"[everything charged|the whole charge] for the order, shipping in - {V.plain2(rng)}"]),
        ])
        return dict(files=files, header=header, rows=rows, out=out, what=what, fields=fields, folder=folder,
                    key=oc, numeric={tc},
                    order=_order(rng, dc, oc),
                    roles={"date": dc, "name": vc, "group": vc, "value": tc},
                    reads=[exec_(f"head -n 40 {folder}/*.eml")], label="order emails", unit="order")

    @staticmethod
    def _price_page(ctx: OpContext) -> _Found:
        """A supplier's saved price-list page: 6-9 products (a bundle, maybe) with SKU, category, a price and
        availability in a few HTML spellings, between a nav bar and a footer; and the products' rows."""
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        supplier = flavor.org(rng)
        items = rng.sample(voc["items"], k=min(len(voc["items"]), rng.randint(4, 6)))
        extra = [f"{rng.choice(['premium', 'eco', 'bulk', 'mini'])} {it}" for it in rng.sample(voc["items"], 2)]
        if rng.random() < 0.6:
            a, b = rng.sample(voc["items"], 2)
            extra.append(f"{a} & {b} bundle")
        items = list(dict.fromkeys(items + extra))
        prefix = "".join(w[0] for w in supplier.split()).upper()
        skus = rng.sample(range(1000, 9999), len(items))
        cats = rng.sample(voc["categories"], k=rng.randint(2, 3))
        rows, trs = [], []
        for it, sku_n in zip(items, skus, strict=True):
            name = it[:1].upper() + it[1:]
            pack = f"{prefix}-{sku_n}"
            price = flavor.amount(rng, 1, 250)
            stock = rng.random() < 0.7
            cat = rng.choice(cats)
            rows.append([name, pack, cat, money(price), "yes" if stock else "no"])
            price_html = rng.choice([f"€{price:.2f}", f"<span class=\"price\">€ {price:,.2f}</span>",
                                     f"{price:.2f}&nbsp;EUR"])
            stock_html = rng.choice(["<b>In stock</b>", "In stock", "&#10003; available"]) if stock else \
                rng.choice(["Out of stock", "<i>sold out</i>", "back-order"])
            trs.append(f"      <tr><td>{html.escape(name)}</td><td>{pack}</td><td>{cat}</td>"
                       f"<td class=\"num\">{price_html}</td>"
                       f"<td>{stock_html}</td></tr>")
        page = "\n".join([
            "<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\">", f"<title>{html.escape(supplier)} - price list</title>",
            "<style>td.num{text-align:right}</style></head><body>",
            "<nav><a href=\"/\">Home</a> | <a href=\"/shop\">Shop</a> | <a href=\"/contact\">Contact</a></nav>",
            f"<h1>{html.escape(supplier)}: trade price list</h1>",
            f"<p>Prices valid from {flavor.date_in(rng, 2026).strftime('%d %B %Y')}. All prices include VAT.</p>",
            "<table id=\"prices\">", "  <thead>",
            "    <tr><th>Product</th><th>SKU</th><th>Category</th><th>Price</th><th>Availability</th></tr>", "  </thead>",
            "  <tbody>", *trs, "  </tbody>", "</table>",
            f"<footer><p>Questions? Call {rng.randint(200, 999)} {rng.randint(1000, 9999)} - "
            f"&copy; 2026 {html.escape(supplier)}</p></footer>", "</body></html>", ""])
        sname = flavor.slug(supplier)
        path = ctx.path(V.join(rng.choice(["", "", "downloads", "web", "suppliers"]), rng.choice(
            ["price_list.html", "supplier_prices.html", "saved_page.html", f"{sname}.html", f"{sname}_prices.html",
             "catalogue.html"])))
        return _Found([WorkspaceFile(path=path, content=page)], rows, "", source=supplier)

    def _html(self, ctx: OpContext) -> dict:
        """The web page variant: the page, then the output's columns and path and how the request names the
        fields."""
        rng = ctx.rng
        found = self._price_page(ctx)
        rows, supplier, path = found.rows, found.source, found.files[0].path
        sname = flavor.slug(supplier)
        pc, kc, cc, prc, sc = (rng.choice(c) for c in (["product", "item", "name"], ["sku", "code", "article"],
                                                       ["category", "section", "range"],
                                                       ["price", "price_eur", "unit_price"],
                                                       ["in_stock", "available", "stocked"]))
        header = [pc, kc, cc, prc, sc]
        out = ctx.path(rng.choice(["prices.csv", "price_list.csv", "supplier_prices.csv", f"{sname}_prices.csv",
                                   "catalogue.csv"]))
        what = expand("the price table on the saved web page `{p}` (from {s})", rng, p=path, s=supplier)
        what = what[:1].lower() + what[1:]
        fields = _fields(rng, [
            (pc, ["the name as shown, with HTML entities decoded", "the product name as displayed, entities like "
                  "&amp; decoded", "the item's name the way the page shows it, HTML entities turned back into "
                  "characters"]),
            (kc, ["the SKU", "the SKU code", "the product's SKU", "its stock-keeping code (SKU)"]),
            (cc, ["", "the category", "the section it is listed under", "the category column as is"]),
            (prc, ["a plain number with two decimals, no currency", "the price without the currency sign, two "
                   "decimals", f"the price as {V.plain2(rng)}, no currency symbol", "the unit price, bare number, "
                   "2 decimal places"]),
            (sc, ["yes if the item is in stock or available, otherwise no", "yes when the page says in stock or available, else no",
                  "`yes` for in stock / available, `no` for anything else", "no unless the page marks it in stock "
                  "or available, in which case yes"]),
        ])
        return dict(files=found.files, header=header, rows=rows, out=out, what=what,
                    fields=fields, folder="", key=pc, numeric={prc},
                    order=rng.choice(["in the page's order", "in the same order as on the page", "in page order",
                                      "keeping the table's order"]),
                    roles={"name": pc, "group": cc, "value": prc},
                    reads=[read(path)], label="price list", unit="product")

    # ----------------------------------------------------------------------------------------- data: consumed
    def _messages(self, ctx: OpContext, source: Artifact):
        msgs = source.data
        if not isinstance(msgs, list) or len(msgs) < 2:
            return None
        rows = []
        for m in msgs:
            if not isinstance(m, dict):
                return None
            addr = parseaddr(str(m.get("from", "")))[1]
            d = parse_when(m.get("date"))
            subj = str(m.get("subject", "")).strip()
            if not addr or d is None or not subj:
                return None
            rows.append([d.isoformat(), addr.lower(), subj])
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
        rng = ctx.rng
        dc, fc, sc = (rng.choice(c) for c in (["date", "sent_on", "day"], ["from", "sender", "from_address"],
                                              ["subject", "title", "subject_line"]))
        header = [dc, fc, sc]
        out = ctx.path(rng.choice(["message_index.csv", "mail_log.csv", "inbox_index.csv", "mail_list.csv",
                                   "messages.csv"]))
        fields = _fields(rng, [
            (dc, ["the day it was sent, YYYY-MM-DD", "the sending date, 2026-03-05 style", "the date sent, as an ISO "
                  "date", "the day of the message in year-month-day form"]),
            (fc, ["the sender's bare email address", "the sender's address only, no display name",
                  "just the From address, lowercase", "the address the message came from, without the name"]),
            (sc, ["", "the subject", "the subject line as is", "the subject, unchanged"]),
        ])
        return dict(files=[], header=header, rows=rows, out=out, what=refer(source, ctx.rng), fields=fields, folder="",
                    key=sc, numeric=set(), order=f"sorted by {dc}, then {fc}, then {sc}",
                    roles={"date": dc, "name": fc, "group": fc}, label="messages", unit="message",
                    reads=[read(source.path)] if "." in source.path.rsplit("/", 1)[-1] else [ls(source.path)])

    def _document(self, ctx: OpContext, source: Artifact):
        text = source.data if isinstance(source.data, str) else None
        if not text:
            return None
        rng = ctx.rng
        t = md_table(text)
        if t is not None:
            header, rows = t
            out = ctx.path(rng.choice(["extracted_table.csv", "table_from_report.csv", "figures.csv"]))
            numeric = {h for i, h in enumerate(header) if all(re.fullmatch(r"-?\d+(\.\d+)?", r[i]) for r in rows)}
            roles = {}
            text_cols = [h for h in header if h not in numeric]
            if text_cols:
                roles.update(name=text_cols[0], group=text_cols[0])
            if numeric:
                roles["value"] = next(h for h in header if h in numeric)
            return dict(files=[], header=header, rows=rows, out=out, what=refer(source, ctx.rng),
                        fields=f"the table (keep its header row {', '.join(header)}; one CSV row per table row, cell "
                               "text unchanged)", folder="", key=header[0], numeric=numeric,
                        order="in the same order as the table", roles=roles, reads=[], label="table", unit="table row")
        pairs = md_pairs(text)
        if len(pairs) >= 3:
            out = ctx.path(rng.choice(["key_figures.csv", "facts.csv", "extracted_fields.csv"]))
            return dict(files=[], header=["key", "value"], rows=[list(p) for p in pairs], out=out, what=refer(source, ctx.rng),
                        fields="every bullet line of the form `- key: value` (key = the text before the first colon, "
                               "value = the text after it, both trimmed, written as they appear)", folder="",
                        key="key", numeric=set(), order="in the order they appear", roles={"name": "key"},
                        reads=[], label="key facts", unit="bullet")
        heads = md_headings(text)
        if len(heads) >= 2:
            return dict(outline=[{"level": lv, "title": tt} for lv, tt in heads], what=refer(source, ctx.rng))
        return None

    # ----------------------------------------------------------------------------------------- plan
    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        rng = ctx.rng
        spec = None
        src_path = None
        if source is not None and source.kind == MESSAGES:
            spec = self._messages(ctx, source)
        elif source is not None and source.kind == DOCUMENT:
            spec = self._document(ctx, source)
            src_path = source.path
        if spec is not None and "outline" in spec:
            return self._outline_plan(ctx, source, spec)
        if spec is None:
            src_path = None
            spec = rng.choice([self._receipts, self._orders, self._html])(ctx)
        ask = self._request(ctx, spec)
        header, rows, out, jpath, records = spec["header"], spec["rows"], spec["out"], ask.jpath, ask.records
        checks = self._checks(spec, jpath, records)
        steps = list(spec["reads"]) + ([read(src_path)] if src_path else [])
        steps.append(write(out, to_csv(header, rows)))
        if jpath:
            steps.append(write(jpath, _json(records)))
        # partial: the first half of the rows, in reverse order, with one field of each row left raw/blank
        per_field = [h for h in header if h != spec["key"]]
        half = [list(r) for r in rows[: max(1, len(rows) // 2)]][::-1]
        blank_col = header.index(per_field[-1]) if per_field else 0
        for r in half[1:] if len(rows) > 1 else half:
            r[blank_col] = ""
        outputs = [Artifact(out, TABLE, {"header": header, "rows": rows}, expand("[the extracted {l} table|the {l} table I asked for|the {l} extracted above|the table of "
                            "{l}] ({o})", rng, clause=True, l=spec['label'], o=out),
                            roles=spec["roles"])]
        if jpath:
            outputs.append(Artifact(jpath, RECORDS, records, f"the extracted {spec['label']} records ({jpath})",
                                    roles=spec["roles"]))
        instruction = V.with_aside(ctx.rng, ctx.persona, ask.instruction)
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=spec["files"],
            checks=checks,
            steps=steps,
            partial=[write(out, to_csv(header, half))],
            outputs=outputs,
            summary=f"extract {spec['label']} into {out}" + (f" and {jpath}" if jpath else ""),
            fingerprint=digest([header, rows]),
        )

    # ----------------------------------------------------------------------------------------- phrasing
    def _request(self, ctx: OpContext, spec: dict) -> _Request:
        """Whether a JSON copy is asked for too (and where), and the request: what to read, the fields, the
        columns and the order, the JSON note; for the operation's own files often a word on what they are. The
        persona's aside is added by plan(), after the outputs are named."""
        rng = ctx.rng
        header, rows, out = spec["header"], spec["rows"], spec["out"]
        ctx.used_paths.update(f.path for f in spec["files"])
        also_json = rng.random() < 0.5 and bool(spec["numeric"] or rng.random() < 0.5)
        jpath = ctx.path(out.rsplit(".", 1)[0] + ".json") if also_json else None
        records = _typed(header, rows, spec["numeric"])
        json_note = ""
        if jpath:
            nums = ", ".join(f"`{h}`" for h in sorted(spec["numeric"]))
            numtxt = "" if not nums else one_of(rng, [
                "; {nums} as JSON numbers, not strings", "; numbers ({nums}) unquoted",
                "; {nums} [must be|as] [real|actual] numbers[, no quotes|]",
                "; keep {nums} numeric, [not|never] [text|strings]"], nums=nums)
            json_note = " " + one_of(rng, [
                "[Also|In addition,|And] [@save] [the same records|those rows|the same data] as [a JSON array of "
                "objects|a JSON list of records|JSON (an array of objects)] at `{j}` (keys = the column names{nt}).",
                "[A JSON copy|The same thing as JSON] [goes to|at] `{j}` too: [a list|an array] with one object per "
                "row, keyed by the column names{nt}.",
                "[I also want|Please also write] `{j}`, [each row|every row] as an object whose keys are the CSV's "
                "column names{nt}.",
                "[Mirror|Duplicate] the table [in|as] `{j}` ([an array of objects|one JSON object per row], the "
                "[column names|headers] as keys{nt}).",
            ], j=jpath, nt=numtxt)
        cols = V.cols(rng, header)
        instruction = one_of(rng, [
            "Go through {what} and pull out {fields}. [Save|Write|Put] one row per {unit} to `{out}` with the header {cols}, "
            "{order}.{json}",
            "I [want|need] the data in {what} as a table: write `{out}` with the columns {cols}, that is {fields}; "
            "{order}.{json}",
            "Into the CSV `{out}` (header: {cols}; {order}), extract from {what}: {fields}.{json}",
            "Could you [turn|make] {what} into a [CSV|spreadsheet] at `{out}`? [One row per {unit}|A row for each "
            "{unit}], columns {cols}: {fields}. Rows {order}.{json}",
            "[Read|Look at] {what}. [For each|For every] {unit}, I want {fields} - in `{out}` ({cols}), {order}.{json}",
            "[Typing|Copying] {what} [up|out] by hand [takes forever|is what I usually do]. [Instead,|Could you]"
            " [build|make] `{out}` [- header|with header] {cols} - [from them|holding] {fields}; {order}.{json}",
            "`{out}` [should get|needs] {one} from {what}, [laid out as|columns] {cols}: {fields}. [Keep the rows|"
            "Rows] {order}.{json}",
        ], one=expand("[one row per|a line for each] {u}", rng, clause=True, u=spec["unit"]), what=spec["what"], fields=spec["fields"], unit=spec["unit"], out=out, cols=cols, order=spec["order"],
            json=json_note)
        if spec["files"] and spec["roles"].get("name") in header:  # its own files: a word on what they are
            instruction = self._with_tale(ctx, spec, instruction)
        return _Request(jpath, records, instruction)

    @staticmethod
    def _with_tale(ctx: OpContext, spec: dict, instruction: str) -> str:
        """The request with, 65% of the time, a sentence about the files (how many, from whom, the persona's
        chore of typing them up) before or after it."""
        rng = ctx.rng
        header, rows = spec["header"], spec["rows"]
        ni = header.index(spec["roles"]["name"])
        names = list(dict.fromkeys(r[ni] for r in rows))
        n1, n2 = (names * 2)[:2] if len(names) < 2 else rng.sample(names, 2)
        tales = [
            "[These are|There are] {k} {unit}s[, from {n1}, {n2} and others| in there, {n1} and {n2} among "
            "them].",
            "I [usually|normally] [type|copy] these into {tool} by hand[ - {k} of them this time|].",
            "[As a|Being a] {job}, I [get|collect] [a lot of|piles of] these; {n1} [is the worst for it|sends "
            "the most].",
            "[{n1} and {n2} are in there|Some are from {n1}, some from {n2}], [all|each] in [its|their] own "
            "[format|layout].",
            "[Nobody|No one] [has|'s] [logged|entered] these {unit}s [yet|since {n1}'s came in].",
        ]
        if spec["unit"] == "product":
            tales = [
                "[The list has|There are] {k} {unit}s[, {n1} and {n2} among them| on it, from {n1} to {n2}].",
                "I [usually|normally] [retype|copy] [this list|these prices] into {tool} by hand[ - {k} lines "
                "this time|].",
                "[As a|Being a] {job}, I [reorder|restock] from [this list|them] [every month|often]; {n1} "
                "[is what we go through fastest|matters most].",
            ]
        tale = one_of(rng, tales, k=len(rows), unit=spec["unit"], n1=n1, n2=n2, tool=rng.choice(list(ctx.persona.tools)),
                      job=ctx.persona.occupation)
        if rng.random() < 0.65:
            instruction = f"{tale} {instruction}" if rng.random() < 0.5 else f"{instruction} {tale}"
        return instruction

    # ----------------------------------------------------------------------------------------- checks
    @staticmethod
    def _checks(spec: dict, jpath: str | None, records: list[dict]) -> list[Check]:
        """The rows; the fields in two halves (each with the key), or the key's values alone; the row order; the
        JSON records, typed, when asked for."""
        header, rows, out, key = spec["header"], spec["rows"], spec["out"], spec["key"]
        pcols = [key] if spec.get("path_key") else []
        base = spec["folder"]
        checks = [
            Check("rows_extracted", "data_path_rows",
                  {"path": out, "header": header, "rows": rows, "path_columns": pcols, "base": base}),
        ]
        per_field = [h for h in header if h != key]
        if len(per_field) >= 2:
            mid = len(per_field) // 2
            for part in (per_field[:mid], per_field[mid:]):
                cols = [key] + part
                idx = [header.index(c) for c in cols]
                checks.append(Check(f"{flavor.slug('_'.join(part)) or 'fields'}_correct", "data_path_rows",
                                    {"path": out, "header": cols, "rows": [[r[i] for i in idx] for r in rows],
                                     "path_columns": pcols, "base": base}))
        if len(per_field) < 2:
            checks.append(Check(f"{flavor.slug(key)}_values_found", "data_path_rows",
                                {"path": out, "header": [key], "rows": [[r[header.index(key)]] for r in rows],
                                 "path_columns": pcols, "base": base}))
        checks.append(Check("row_order", "data_path_rows",
                            {"path": out, "header": header, "rows": rows, "path_columns": pcols, "base": base,
                             "ordered": True}))
        if jpath:
            checks.append(Check("json_records", "data_records",
                                {"path": jpath, "records": records, "typed": True}))
        return checks

    # ----------------------------------------------------------------------------------------- outline variant
    def _outline_plan(self, ctx: OpContext, source: Artifact, spec: dict) -> StepPlan:
        rng = ctx.rng
        outline = spec["outline"]
        out = ctx.path(rng.choice(["outline.json", "headings.json", "document_outline.json", "toc.json",
                                   "structure.json", "sections.json"]))
        instruction = rng.choice([
            f"Extract the outline of {spec['what']}: write `{out}` as a JSON array with one object per markdown "
            "heading, in document order, each {\"level\": <number of #, as a JSON number>, \"title\": <heading "
            "text without the #s>}.",
            f"Turn the headings of {spec['what']} into structured data: `{out}` must be a JSON array of "
            "{\"level\", \"title\"} objects (level = how many # the heading has, as a number; title = the heading "
            "text), one per heading, in the order they appear.",
            f"Could you build a table of contents for {spec['what']}? Save it as `{out}`: a JSON list, one "
            "{\"level\": ..., \"title\": ...} object per markdown heading in reading order, level being the "
            "count of # characters (a number, not a string) and title the heading text without them.",
            f"`{out}` should map out {spec['what']}: every markdown heading, top to bottom, as an object "
            "{\"level\": n, \"title\": \"...\"} in a JSON array - n is an integer (a ## heading is 2) and the "
            "title drops the leading #s.",
            f"For {spec['what']} I need a machine-readable outline in `{out}`. One JSON object per heading, "
            "keeping their order; keys \"level\" (integer, the number of hash marks) and \"title\" (what follows "
            "the hashes).",
            f"I want the heading structure of {spec['what']} as JSON in `{out}` - an array of objects with a numeric "
            "\"level\" (1 for #, 2 for ##, and so on) and a \"title\" (the text after the #s), in document order.",
        ])
        checks = [
            Check("headings_extracted", "data_records", {"path": out, "records": outline}),
            Check("levels_are_numbers", "data_records", {"path": out, "records": outline, "typed": True}),
            Check("outline_in_order", "data_records", {"path": out, "records": outline, "ordered": True,
                                                       "exact_keys": True}),
        ]
        partial = [{"level": str(o["level"]), "title": o["title"]} for o in outline[: max(1, len(outline) // 2)]]
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            checks=checks,
            steps=[read(source.path), write(out, _json(outline))],
            partial=[write(out, _json(partial))],
            outputs=[Artifact(out, RECORDS, outline, f"the heading outline ({out})", roles={"name": "title",
                                                                                          "value": "level"})],
            summary=f"extract the outline of {source.path} into {out}",
            fingerprint=digest(outline),
        )


GENERATORS = [ExtractStructuredData()]
