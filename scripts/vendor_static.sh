#!/bin/sh
# Copy the browser builds of the chat page's front-end libraries into static/vendor/.
#
# Versions are pinned in package.json / package-lock.json. The copied files are committed,
# so running the site needs no npm; run this again only after changing a pinned version:
#
#     sh scripts/vendor_static.sh
#
# node_modules/ is git-ignored and can be deleted afterwards.
set -eu

cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENDOR="$ROOT/static/vendor"
NM="$ROOT/node_modules"

npm ci --ignore-scripts --no-audit --no-fund

version() {
    node -p "require('$NM/$1/package.json').version"
}

copy() {  # copy SRC (relative to node_modules) to DEST (relative to static/vendor)
    mkdir -p "$(dirname "$VENDOR/$2")"
    cp "$NM/$1" "$VENDOR/$2"
}

rm -rf "$VENDOR/marked" "$VENDOR/dompurify" "$VENDOR/highlight"

# marked: markdown -> HTML (UMD build, defines window.marked)
# (the source maps come along: the files reference them, and Django's
# ManifestStaticFilesStorage refuses to collect a file whose source map is missing)
copy marked/lib/marked.umd.js marked/marked.umd.js
copy marked/lib/marked.umd.js.map marked/marked.umd.js.map
copy marked/LICENSE marked/LICENSE

# DOMPurify: HTML sanitiser (defines window.DOMPurify); dual licensed Apache-2.0 / MPL-2.0
copy dompurify/dist/purify.min.js dompurify/purify.min.js
copy dompurify/dist/purify.min.js.map dompurify/purify.min.js.map
copy dompurify/LICENSE dompurify/LICENSE
if [ -f "$NM/dompurify/LICENSE-MPL" ]; then
    copy dompurify/LICENSE-MPL dompurify/LICENSE-MPL
fi

# highlight.js: the prebuilt browser bundle with the common languages (defines window.hljs)
# plus one light and one dark theme
copy @highlightjs/cdn-assets/highlight.min.js highlight/highlight.min.js
copy @highlightjs/cdn-assets/styles/github.min.css highlight/github.min.css
copy @highlightjs/cdn-assets/styles/github-dark.min.css highlight/github-dark.min.css
copy @highlightjs/cdn-assets/LICENSE highlight/LICENSE

cat > "$VENDOR/README.md" <<README
# Vendored front-end libraries

Browser builds copied from the npm registry (https://registry.npmjs.org) by
\`scripts/vendor_static.sh\`; the exact versions are pinned in \`package.json\` and
\`package-lock.json\` at the project root. Nothing is loaded from a CDN.
Do not edit these files: change the pinned version and run the script again.

| folder | npm package | version | files | licence |
|---|---|---|---|---|
| \`marked/\` | [marked](https://www.npmjs.com/package/marked) | $(version marked) | \`lib/marked.umd.js\` | MIT (\`LICENSE\`) |
| \`dompurify/\` | [dompurify](https://www.npmjs.com/package/dompurify) | $(version dompurify) | \`dist/purify.min.js\` | Apache-2.0 or MPL-2.0 (\`LICENSE\`, \`LICENSE-MPL\`) |
| \`highlight/\` | [@highlightjs/cdn-assets](https://www.npmjs.com/package/@highlightjs/cdn-assets) (the prebuilt browser bundle of highlight.js, common languages) | $(version @highlightjs/cdn-assets) | \`highlight.min.js\`, \`styles/github.min.css\` (light), \`styles/github-dark.min.css\` (dark) | BSD-3-Clause (\`LICENSE\`) |
README

echo "static/vendor updated:"
find "$VENDOR" -type f | sort | sed "s|$ROOT/||"
