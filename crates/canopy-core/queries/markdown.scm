; Canopy extraction rules for Markdown (block grammar of tree-sitter-md).

(section (atx_heading heading_content: (inline) @name)) @definition.section
(section (setext_heading heading_content: (paragraph) @name)) @definition.section
(section (paragraph) @definition.paragraph)
(fenced_code_block) @definition.code_block
(indented_code_block) @definition.code_block
