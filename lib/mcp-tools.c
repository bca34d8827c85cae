/* SPDX-License-Identifier: Apache-2.0 */
/* The MCP tools: every family's table, in the order tools/list gives them (lib/mcp-tool.h). */
#include <string.h>

#include "macro.h"
#include "mcp-tool.h"

static const struct {
        const McpTool *tools;
        const size_t *count;
} families[] = {
        { mcp_tools_sandbox, &mcp_tools_sandbox_count },
        { mcp_tools_run, &mcp_tools_run_count },
        { mcp_tools_files, &mcp_tools_files_count },
};

size_t mcp_tools_count(void) {
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(families); i++)
                n += *families[i].count;
        return n;
}

const McpTool *mcp_tool_at(size_t i) {
        for (size_t f = 0; f < ELEMENTSOF(families); f++) {
                if (i < *families[f].count)
                        return &families[f].tools[i];
                i -= *families[f].count;
        }
        return NULL;
}

const McpTool *mcp_tool_find(const char *name) {
        for (size_t f = 0; f < ELEMENTSOF(families); f++)
                for (size_t i = 0; i < *families[f].count; i++)
                        if (streq(families[f].tools[i].name, name))
                                return &families[f].tools[i];
        return NULL;
}
