"""Every relative link of the documentation (README.md, docs/*.md, CONTRIBUTING.md)
resolves: the file or folder it names exists, and an `#anchor` names a heading of the
Markdown file it points into, as GitHub writes heading anchors."""

import os
import re
from typing import List, Set

import pytest

import paths
import shipped_commands

_FENCE = re.compile(r"^(```|~~~)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose_lines(text: str) -> List[str]:
  """The lines outside fenced code blocks, with inline code spans left in place."""
  lines, fenced = [], False
  for line in text.splitlines():
    if _FENCE.match(line.strip()):
      fenced = not fenced
      continue
    lines.append("" if fenced else line)
  return lines


def anchors(path: str) -> Set[str]:
  """The anchors GitHub gives the headings of a Markdown file: the text lower-cased,
  links and code marks reduced to their text, punctuation but `-` and `_` removed,
  spaces made `-`; a repeated anchor gets -1, -2, ..."""
  with open(path, encoding="utf-8") as f:
    lines = _prose_lines(f.read())
  found, counts = set(), {}
  for line in lines:
    match = _HEADING.match(line)
    if not match:
      continue
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(2)).replace("`", "")
    slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
    count = counts.get(slug, 0)
    counts[slug] = count + 1
    found.add(slug if count == 0 else f"{slug}-{count}")
  return found


def link_problems(path: str) -> List[str]:
  """'FILE:LINE: TARGET ...' for each relative link of a Markdown file that does not
  resolve."""
  with open(path, encoding="utf-8") as f:
    lines = _prose_lines(f.read())
  problems = []
  source = os.path.relpath(path, paths.ROOT)
  for number, line in enumerate(lines, start=1):
    for match in _LINK.finditer(_INLINE_CODE.sub("", line)):
      target = match.group(1)
      if re.match(r"^[a-z][a-z0-9+.-]*:", target):
        continue  # http:, https:, mailto:
      file_part, _, anchor = target.partition("#")
      resolved = (os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                  if file_part else path)
      if not os.path.exists(resolved):
        problems.append(f"{source}:{number}: {target}: no such file")
      elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
        problems.append(f"{source}:{number}: {target}: no heading #{anchor}")
  return problems


@pytest.mark.parametrize(
    "path", shipped_commands.doc_files(),
    ids=lambda p: os.path.relpath(p, paths.ROOT))
def test_every_relative_link_of_the_documentation_resolves(path):
  assert not link_problems(path)


# The pages by user task that the README leads to.
PAGES = ("docs/pretraining-data.md", "docs/pretraining.md", "docs/fine-tuning.md",
         "docs/engines.md", "docs/distributed-and-cloud.md", "docs/export-and-serving.md",
         "docs/checkpoints-and-conversion.md", "docs/reliability.md", "docs/results.md",
         "CONTRIBUTING.md")


def test_the_readme_links_every_page_by_user_task():
  with open(shipped_commands.README, encoding="utf-8") as f:
    readme = f.read()
  assert not [page for page in PAGES if f"]({page})" not in readme]


def test_heading_anchors_follow_githubs_rule(tmp_path):
  page = tmp_path / "page.md"
  page.write_text("# Asking an export: `bert-tf-query`\n\n## Several processes, one "
                  "model_dir\n\n```bash\n# not a heading\n```\n\n## Notes\n\n## Notes\n",
                  encoding="utf-8")
  assert anchors(str(page)) == {"asking-an-export-bert-tf-query",
                                "several-processes-one-model_dir", "notes", "notes-1"}


def test_a_missing_file_or_heading_is_caught(tmp_path):
  (tmp_path / "other.md").write_text("# Present heading\n", encoding="utf-8")
  page = tmp_path / "page.md"
  page.write_text("[ok](other.md#present-heading) [web](https://example.com) `[no](x.md)`\n"
                  "[gone](missing.md)\n[wrong](other.md#absent)\n[self](#nowhere)\n",
                  encoding="utf-8")
  problems = [p.split(": ", 1)[1] for p in link_problems(str(page))]
  assert problems == ["missing.md: no such file", "other.md#absent: no heading #absent",
                      "#nowhere: no heading #nowhere"]
