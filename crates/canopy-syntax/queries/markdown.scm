; Canopy extraction rules for Markdown (block grammar of tree-sitter-md).

(section (atx_heading heading_content: (inline) @name)) @definition.section
; Setext headings (`Title` over `=====`) are not nested into sections by the
; grammar: the extractor grows their span over the content that follows.
(setext_heading heading_content: (paragraph) @name) @definition.section
(section (paragraph) @definition.paragraph)
(fenced_code_block) @definition.code_block
(indented_code_block) @definition.code_block
