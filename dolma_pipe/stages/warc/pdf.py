"""PDF payloads into text: the text layer, read by pdfium (pypdfium2; no OCR, no model).

A record whose payload is a PDF (declared or sniffed as ``application/pdf``) is extracted when
``content_types`` names ``application/pdf``: each page's text in reading order as pdfium gives it,
pages separated by a blank line. A PDF pdfium cannot open is an ``extractor_error``; like HTML,
it is read in the extractor's child process, where a crash in pdfium costs that page only.
"""

from __future__ import annotations

PDF_TYPE = "application/pdf"


class PdfText:
    """The text layer of a PDF."""

    name = "pypdfium2"

    def extract(self, data: bytes) -> str:
        import pypdfium2 as pdfium  # on the first PDF: a run of HTML only never loads pdfium

        doc = pdfium.PdfDocument(data)
        try:
            pages = []
            for index in range(len(doc)):
                page = doc[index]
                textpage = page.get_textpage()
                pages.append(textpage.get_text_bounded().replace("\r\n", "\n").replace("\r", "\n").strip())
                textpage.close()
                page.close()
            return "\n\n".join(p for p in pages if p)
        finally:
            doc.close()
