"""The message catalogue: every user-facing string of the tool, in English and Chinese.

key: (English, Chinese). Placeholders are str.format fields and must be the same in both.
Keys ending in .one / .many are the two forms of a counted message (i18n.tn). A test checks that
both languages are complete, that placeholders agree, and that every key the code uses is here
and every key here is used. Problems carry their own texts in their specs.
"""
MESSAGES: dict[str, tuple[str, str]] = {
    # ------------------------------------------------------------ verdicts
    "verdict.pass": ("PASS", "通过"),
    "verdict.fail": ("FAIL", "未通过"),
    "verdict.error": ("ERROR", "错误"),
    "verdict.skip": ("skip", "跳过"),

    # ------------------------------------------------------------ check report: first screen
    "report.seed": ("seed {seed}", "种子 {seed}"),
    "report.seconds": ("{s} s", "{s} 秒"),
    "report.all_passed.one": ("the case passed (outputs and gradients)", "这 1 个用例通过（输出和梯度都正确）"),
    "report.all_passed.many": ("all {n} cases passed (outputs and gradients)", "全部 {n} 个用例通过（输出和梯度都正确）"),
    # a problem whose cases compare no gradient (a cache, a sampler, a figure): its outputs only
    "report.all_passed_outputs.one": ("the case passed", "这 1 个用例通过"),
    "report.all_passed_outputs.many": ("all {n} cases passed", "全部 {n} 个用例通过"),
    "report.nothing_ran": ("no case ran", "没有运行任何用例"),
    "report.skipped.one": ("1 more case needs CUDA: not run here", "另有 1 个用例需要 CUDA，这台机器上没有运行"),
    "report.skipped.many": ("{n} more cases need CUDA: not run here", "另有 {n} 个用例需要 CUDA，这台机器上没有运行"),
    "report.stub": ("not written yet: grading stops at the first case", "还没写完：评测在第一个用例处停止"),
    "report.cases_failed": ("{failed} of {ran} cases failed", "{ran} 个用例中 {failed} 个未通过"),
    "report.where_failed": (" ({fwd} in the output, {grad} only in the gradients)",
                            "（{fwd} 个输出错误，{grad} 个仅梯度错误）"),
    "report.grads_only": (" (outputs right, gradients wrong)", "（输出正确，梯度错误）"),
    "report.forbidden": ("uses forbidden `{name}` (line {line})", "使用了禁止的 `{name}`（第 {line} 行）"),
    "report.line": ("line {line}: {message}", "第 {line} 行：{message}"),
    "report.in": ("in", "位于"),
    "report.looks_like": ("looks like", "看起来是"),
    "report.shows": ("what the failure shows", "失败的规律"),
    "report.note": ("note: {text}", "提示：{text}"),
    "report.printed.one": ("your code printed 1 line (shown with --verbose)", "你的代码打印了 1 行（--verbose 可查看）"),
    "report.printed.many": ("your code printed {n} lines (shown with --verbose)",
                            "你的代码打印了 {n} 行（--verbose 可查看）"),
    "report.more_notes.one": ("1 more note (shown with --verbose)", "还有 1 条提示（--verbose 可查看）"),
    "report.more_notes.many": ("{n} more notes (shown with --verbose)", "还有 {n} 条提示（--verbose 可查看）"),
    "report.replay": ("replay: ", "复现："),
    "report.named": ("{label}: {id}", "{label}：{id}"),
    "report.stuck": ("stuck? attn-drill hint {id}", "卡住了？attn-drill hint {id}"),
    "report.details": ("details: {command}", "详情：{command}"),
    "report.failing": ("failing: {names}", "未通过：{names}"),
    "report.passing": ("passing: {names}", "通过：{names}"),
    "report.join": ("; ", "；"),
    "join.list": (", ", "、"),
    "symptom.softmax_overflow": ("softmax overflow: exp of large scores", "softmax 溢出：对很大的分数取 exp"),
    "symptom.mask_removes_every_key": ("a mask that hides every key of a row", "掩码遮住了一整行的所有 key"),
    "symptom.causal_inverted": ("the causal mask turned around", "因果掩码方向反了"),
    "symptom.mask_inverted": ("the padding mask inverted", "填充掩码取反了"),
    "symptom.causal_leak": ("future keys visible (a causal leak)", "看到了未来的 key（因果泄漏）"),
    "symptom.diagonal_masked": ("the diagonal masked too", "对角线也被遮住了"),
    "symptom.padding_on_query_axis": ("padding masked on the query axis", "填充掩码用在了 query 维上"),
    "symptom.padding_not_applied": ("padded keys not removed", "填充的 key 没有被去掉"),
    "symptom.padding_wrong": ("wrong only in the padded batch elements", "只有带填充的样本出错"),
    "symptom.gradients_only": ("right outputs, wrong gradients", "输出正确，梯度错误"),
    "symptom.only": ("fails only with {traits}", "只在{traits}时失败"),
    "symptom.and": (" and ", "且"),
    "trait.b1": ("batch 1", "batch 为 1"),
    "trait.l1": ("length 1", "序列长度为 1"),
    "trait.lq_ne_lk": ("Lq ≠ Lk", "query 与 key 长度不同"),
    "trait.dv_ne_d": ("a value width unlike the keys'", "V 的头维与 Q、K 不同"),
    "trait.large_logits": ("large logits", "logits 很大"),
    "trait.pad": ("key padding", "有 key 填充"),
    "trait.causal": ("a causal mask", "有因果掩码"),
    "trait.mask3d": ("a 3-D mask", "有三维掩码"),
    "trait.long": ("long sequences", "序列很长"),
    "trait.h1": ("a single head", "只有一个头"),
    "rating.again": ("again", "重来"),
    "rating.hard": ("hard", "困难"),
    "rating.good": ("good", "良好"),
    "rating.easy": ("easy", "简单"),

    # ------------------------------------------------------------ check report: details
    "report.could_not": ("Your code could not be graded", "你的代码无法评测"),
    "report.failed": ("Your code failed", "你的代码运行失败"),
    "report.exception": ("Exception in your code", "你的代码抛出了异常"),
    "report.printed_title": ("your code printed", "你的代码打印的内容"),
    "report.first_failing": ("first failing case: {name}", "第一个未通过的用例：{name}"),
    "report.inputs_line": ("inputs: {shapes}   dtype: {dtype}", "输入：{shapes}   dtype：{dtype}"),
    "report.grad": ("grad", "梯度"),
    "report.fwd": ("fwd", "前向"),
    "report.failed_in": ("{verdict} {where}", "{verdict}（{where}）"),
    "report.window": ("got vs expected around index {at}", "索引 {at} 附近：实际值与期望值"),
    "report.at_leading": (" at leading index {at}", "（前导索引 {at}）"),
    "report.at_batch_head": (" at (batch, head) {at}", "（batch, head = {at}）"),
    "report.pooled": (" (max-pooled)", "（最大池化）"),
    "report.heatmap": ("error of `{tensor}`{lead} over ({rows_axis} ↓, {cols_axis} →), {rows}×{cols}{pooled}; · within tolerance, ░ ▒ ▓ █ = 10×, 100×, 1000×, more:", "`{tensor}` 的误差{lead}（{rows_axis} ↓，{cols_axis} →），{rows}×{cols}{pooled}；· 在容差内，░ ▒ ▓ █ = 超出 10 倍、100 倍、1000 倍、更多："),
    "report.weights_match": ("Your attention weights (the first softmax) match the reference's: the mistake is after "
                             "the softmax (weights @ V, merging the heads, or the output projection).",
                             "你的注意力权重（第一个 softmax）与参考实现一致：错误在 softmax 之后（weights @ V、"
                             "合并多头，或输出投影）。"),
    "report.weights_differ": ("Your attention weights (the first softmax) already differ from the reference's, so "
                              "the mistake is in the scores, the masks or the softmax.",
                              "你的注意力权重（第一个 softmax）已经与参考实现不同，所以错误在分数、掩码或 softmax 中。"),
    "report.weights_map": ("|yours - reference|{lead} over (query ↓, key →), {rows}×{cols}{pooled}; · equal, ░ ▒ ▓ █ up to 1e-3, 1e-2, 0.1, more:", "|你的 - 参考|{lead}（query ↓，key →），{rows}×{cols}{pooled}；· 相等，░ ▒ ▓ █ 不超过 1e-3、1e-2、0.1、更大："),
    "cmp.differs": ("`{name}`: {bad} of {total} elements ({share}%) differ; greatest difference {worst} at {at} "
                    "(allowed {allowed} + {rtol}·|expected|)",
                    "`{name}`：{total} 个元素中有 {bad} 个（{share}%）不一致；最大差值 {worst}，位于 {at}"
                    "（允许 {allowed} + {rtol}·|期望值|）"),
    "cmp.off_as_whole": ("`{name}` is off as a whole: relative error norm {relnorm} > {gate}",
                         "`{name}` 整体偏离：相对误差范数 {relnorm} > {gate}"),
    "cmp.summary": ("Mismatched elements: {bad} / {total} ({share}%)\n"
                    "Greatest absolute difference: {max_abs} at index {at_abs} (up to {allowed} + {rtol}·|expected| "
                    "allowed)\n"
                    "Greatest relative difference: {max_rel} at index {at_rel}\n"
                    "Relative error norm: {relnorm} (gate {gate}); the reference's own error in this dtype: {ref_err}",
                    "不一致的元素：{bad} / {total}（{share}%）\n"
                    "最大绝对差：{max_abs}，位于索引 {at_abs}（允许 {allowed} + {rtol}·|期望值|）\n"
                    "最大相对差：{max_rel}，位于索引 {at_rel}\n"
                    "相对误差范数：{relnorm}（门限 {gate}）；参考实现在该 dtype 下自身的误差：{ref_err}"),

    # ------------------------------------------------------------ the judge's verdict on a case
    "trace.too_big": ("{op} made a tensor of shape {shape} ({n} elements) in the {phase} pass; the limit for this "
                      "case is {limit} elements (no {what})",
                      "{op} 在{phase}中生成了形状为 {shape} 的张量（{n} 个元素）；本用例的上限是 {limit} 个元素（不得出现{what}）"),
    "trace.phase.forward": ("forward", "前向传播"),
    "trace.phase.backward": ("backward", "反向传播"),
    "trace.phase.autograd": ("automatic differentiation inside the forward", "前向传播中的自动求导"),
    "trace.intermediate": ("intermediate tensor", "这么大的中间张量"),
    "trace.or": (" or ", " 或 "),
    "trace.no_op": ("no {what} op ran; this case checks what {what} receives",
                    "没有运行任何 {what} 算子；这个用例检查的是 {what} 收到的输入"),
    "trace.input_dtype": ("{op} received {got} input; it must receive {want} (upcast before the {what})",
                          "{op} 收到的输入是 {got}；它必须收到 {want}（在 {what} 之前先提升精度）"),
    "trace.autograd": ("autograd ran {n} op(s) ({names}) inside your function: {what} must be computed by your "
                       "own code, not by torch.autograd",
                       "你的函数内部让 autograd 运行了 {n} 个算子（{names}）：{what}必须由你自己的代码计算，不能交给 "
                       "torch.autograd"),
    "trace.incomplete": ("your code ran {n} operations in this case, more than the op recorder keeps: the rules "
                         "on the ops it runs cannot be checked; write it with fewer, larger operations",
                         "你的代码在这个用例里执行了 {n} 个运算，超过了记录器能保存的数量，无法检查关于运算的规则；"
                         "请用更少、更大的运算来写"),
    "trace.peak": ("your code held {got} MiB at once while this case ran (measured by the operating system, "
                   "whatever made it: torch, numpy or lists); the limit is {limit} MiB: do not build the {what}",
                   "运行这个用例时你的代码同时占用了 {got} MiB 内存（由操作系统测得，无论来自 torch、numpy 还是列表）；"
                   "上限是 {limit} MiB：不要构造{what}"),
    "trace.the_backward": ("the backward pass", "反向传播"),
    "judge.an_object": ("a {type} object", "一个 {type} 对象"),
    "judge.a_tensor": ("tensor of shape {shape}, {dtype}, on {device}", "形状为 {shape}、{dtype}、位于 {device} 的张量"),
    "judge.mutated": ("your code changed its input(s) {names} in place; work on copies (e.g. x = x.clone()) or use "
                      "out-of-place ops", "你的代码原地修改了输入 {names}；请在副本上操作（例如 x = x.clone()）或使用非原地运算"),
    "judge.count": ("your code returned {got} value(s); expected {want} ({names})",
                    "你的代码返回了 {got} 个值；应为 {want} 个（{names}）"),
    "judge.not_tensor": ("`{name}` should be a tensor; got {got}", "`{name}` 应该是张量；实际是 {got}"),
    "judge.shape": ("`{name}` has shape {got}; expected {want}", "`{name}` 的形状是 {got}；应为 {want}"),
    "judge.dtype": ("`{name}` has dtype {got}; expected {want} (keep the input's dtype)",
                    "`{name}` 的 dtype 是 {got}；应为 {want}（保持输入的 dtype）"),
    "judge.dtype_stated": ("`{name}` has dtype {got}; expected {want}, the dtype the statement gives it",
                           "`{name}` 的 dtype 是 {got}；应为题目规定的 {want}"),
    "judge.device": ("`{name}` is on {got}; expected {want}", "`{name}` 在 {got} 上；应在 {want} 上"),
    "judge.exact": ("`{name}` differs from the expected values in {bad} of {total} elements",
                    "`{name}` 的 {total} 个元素中有 {bad} 个与期望值不同"),
    "judge.value": ("`{name}` is {got}; expected {want}", "`{name}` 是 {got}；应为 {want}"),
    "judge.nondeterministic": ("{what}; is dropout or randomness active in eval mode?",
                               "{what}；是不是在 eval 模式下仍启用了 dropout 或随机性？"),
    "judge.no_grad": ("no gradient reaches `{name}`: is something detached, computed under no_grad, or not used?",
                      "没有梯度传到 `{name}`：是不是有东西被 detach、在 no_grad 下计算，或根本没被使用？"),
    "judge.grad_shape": ("gradient of `{name}` has shape {got}; expected {want}",
                         "`{name}` 的梯度形状是 {got}；应为 {want}"),
    "judge.gradient_of": ("gradient of {name}", "{name} 的梯度"),
    "judge.gradient_of_param": ("gradient of parameter {name}", "参数 {name} 的梯度"),
    "judge.no_param_grad": ("no gradient reaches parameter `{name}`: is it used, and is nothing detached?",
                            "没有梯度传到参数 `{name}`：它被使用了吗？是否有东西被 detach？"),
    "judge.param_unmapped": ("the reference's parameter `{name}` has no counterpart among yours whose gradient was "
                             "checked", "参考实现的参数 `{name}` 在你的参数中没有对应项，其梯度未能检查"),
    "judge.not_written": ("not written yet: {file}:{line} in {func} still raises NotImplementedError",
                          "还没写完：{file}:{line}（{func}）仍然抛出 NotImplementedError"),
    "cmp.nonfinite": ("`{name}` has {n} NaN/inf value(s), first at index {at}; the expected values are all finite",
                      "`{name}` 有 {n} 个 NaN/inf，第一个位于索引 {at}；期望值全部是有限数"),

    # ------------------------------------------------------------ the engine
    "engine.no_peak": ("the peak memory of a case could not be measured here (no /proc): its memory rule was not "
                       "checked", "这里无法测量用例的峰值内存（没有 /proc）：该用例的内存规则未检查"),
    "engine.no_case": ("no case '{case}' for {id} with seed {seed}{full}; cases: {names}",
                       "{id} 在种子 {seed} 下没有名为 '{case}' 的用例{full}；用例有：{names}"),
    "engine.try_full": (" (try --full)", "（试试 --full）"),
    "engine.no_cuda": ("{reason}; this machine has no CUDA", "{reason}；这台机器没有 CUDA"),
    "engine.unreadable_reply": ("your code's grading process sent back a reply that cannot be read ({why})",
                                "评测你的代码的进程发回了无法读取的回复（{why}）"),
    "engine.full_float64": ("float32-level error in a float64 case (relative error {err}, above the float64 bound "
                            "{bound}): the statement asks float64 inputs to be computed in float64 in what this case "
                            "checks. Either a step ran in float32 (a .float() or a float32 constant?) or a slip of "
                            "logic is this small (a constant such as eps in another place?)",
                            "float64 用例中出现 float32 级别的误差（相对误差 {err}，超过 float64 的界 {bound}）：题目要求"
                            "本用例所检查的部分对 float64 输入全程用 float64 计算。要么某一步用 float32 算了（是不是用了 "
                            ".float() 或 float32 常数？），要么是一个影响这么小的逻辑错误（比如 eps 放错了位置？）"),
    "engine.precision_note": ("float32-level error in a float64 case (relative error {err}): a float32 constant "
                              "(torch.tensor of Python floats is float32), a .float() upcast, or a float32 buffer? "
                              "It passes: in float64 cases, rounding at float32 level is not a mistake of logic",
                              "float64 用例中出现 float32 级别的误差（相对误差 {err}）：是 float32 常数（由 Python 浮点数"
                              "构造的 torch.tensor 是 float32）、.float() 升精度，还是 float32 的缓冲区？仍判为通过："
                              "在 float64 用例中，float32 级别的舍入不是逻辑错误"),
    "engine.uncheckable": ("what your code returned could not be checked ({error})",
                           "你的代码返回的内容无法检查（{error}）"),

    # ------------------------------------------------------------ a room that ended badly
    "room.timeout": ("timed out after {s} s: an infinite loop, or far too much work for these sizes?",
                     "{s} 秒后超时：死循环，还是对这些尺寸做了太多计算？"),
    "room.exit": ("your code called {called}, which ended its grading process", "你的代码调用了 {called}，结束了评测进程"),
    "room.signal": ("signal {n}", "信号 {n}"),
    "room.exit_code": ("exit code {n}", "退出码 {n}"),
    "room.no_status": ("no exit status", "没有退出状态"),
    "room.crash": ("your code crashed its grading process ({what})", "你的代码让评测进程崩溃了（{what}）"),
    "room.oom": ("; out of memory?", "；内存不足？"),
    "room.stop": (".", "。"),
    "room.was_at": (" It was at {file}:{line} in {func}.", "位置：{file}:{line}（{func}）。"),
    "room.ended": ("the grading process of your code has already ended", "评测你的代码的进程已经结束"),
    "room.cannot_send": ("this case cannot be sent to your code's process ({why})", "这个用例无法发送给你的代码所在的进程（{why}）"),
    "room.not_reply": ("your code's grading process sent back something that is not a reply",
                       "评测你的代码的进程发回的内容不是回复"),
    "room.unreadable": ("your code's grading process sent back something that cannot be read ({why})",
                        "评测你的代码的进程发回了无法读取的内容（{why}）"),
    "room.not_protocol": ("not a message of this protocol", "不是本协议的消息"),
    "room.too_big": ("your code's results for this case are larger than a reply may hold ({mib} MiB): do its outputs "
                     "have the shapes the statement asks for, and does it print less?",
                     "你的代码在这个用例上的结果超过了回复允许的大小（{mib} MiB）：输出的形状是否符合题目要求？打印的内容能否少一些？"),

    "room.stopped": ("{what} was raised inside your code; graded code must return a value, not stop the program",
                     "你的代码中抛出了 {what}；评测代码应当返回结果，而不是终止程序"),
    "room.not_own": ("private attributes may be used only on objects of your own classes, and this `self` (or `cls`) "
                     "is a {kind}",
                     "私有属性只能用在你自己定义的类的对象上，而这里的 `self`（或 `cls`）是 {kind}"),
    "room.too_deep": ("your file is nested too deeply to compile (an expression or block thousands of levels deep); "
                      "write it flat",
                      "你的文件嵌套得太深，无法编译（某个表达式或代码块嵌套了成千上万层）；请写得扁平一些"),
    "room.memory": ("ran out of memory ({what}); does something allocate far more than the inputs need?",
                    "内存不足（{what}）；是不是有地方分配了远超输入所需的内存？"),
    "room.not_module": ("`{target}(...)` built a {type}, not a torch.nn.Module", "`{target}(...)` 构造出的是 {type}，不是 torch.nn.Module"),
    "room.missing_names": ("your file defines no `{target}`; it defines: {names}. Keep the names from the stub.",
                           "你的文件没有定义 `{target}`；它定义了：{names}。请保留模板中的名字。"),
    "room.tracer_removed": ("your code removed the grader's op tracer; graded code must not change how torch "
                            "dispatches ops", "你的代码移除了评测器的算子追踪器；评测代码不能改变 torch 分派算子的方式"),
    "room.unblocked": ("your code unblocked torch's fused attention kernels; graded code must not change torch's "
                       "operator table", "你的代码解除了对 torch 融合注意力内核的屏蔽；评测代码不能修改 torch 的算子表"),
    "room.cannot_return": ("what your code returned cannot be sent back to the grader: {why}",
                           "你的代码返回的内容无法发回评测器：{why}"),
    "room.runner_stopped": ("grading stopped inside the runner ({message}); did your code change torch's global state "
                            "(the default device or dtype)?", "评测在运行器内部中止（{message}）；你的代码是否修改了 torch 的"
                            "全局状态（默认设备或 dtype）？"),
    "room.forbidden_call": ("called `{name}`, which this problem forbids: write it by hand",
                            "调用了本题禁止使用的 `{name}`：请手写实现"),
    "room.not_allowed": ("{what} is not allowed while your code is graded", "评测期间不允许：{what}"),
    "params.from_merged": ("your separate {trio} were filled from the reference's merged {module}",
                           "你分开的 {trio} 由参考实现合并的 {module} 填充"),
    "params.to_merged": ("your merged {module} was filled from the reference's {trio}",
                         "你合并的 {module} 由参考实现的 {trio} 填充"),
    "params.matched": ("your {sub} were matched to the reference's {ref}", "你的 {sub} 对应到了参考实现的 {ref}"),
    "params.mismatch": ("your module's parameters do not match the reference's (names and shapes):",
                        "你的模块参数与参考实现不一致（名字和形状）："),
    "params.missing": ("missing in yours", "你的模块中缺少"),
    "params.expected": ("  expected {name} {shape}  [{mark}]", "  应有   {name} {shape}  [{mark}]"),
    "params.found": ("  found    {name} {shape}  ", "  实际   {name} {shape}  "),
    "params.want_shape": ("[expected shape {shape}]", "[应为形状 {shape}]"),
    "params.not_in_ref": ("[not in the reference]", "[参考实现中没有]"),
    "params.keep": ("Keep the names, shapes and bias settings the statement gives (nn.Linear weight is (out, in)).",
                    "请保持题目给出的名字、形状和 bias 设置（nn.Linear 的 weight 形状是 (out, in)）。"),

    # ------------------------------------------------------------ a file before it runs
    "vet.not_utf8": ("is not UTF-8 text", "不是 UTF-8 文本"),
    "vet.unreadable": ("cannot be read ({why})", "无法读取（{why}）"),
    "vet.your_file": ("your file {why}: save it as a UTF-8 Python file", "你的文件{why}：请保存为 UTF-8 编码的 Python 文件"),
    "vet.no_parse": ("your file does not parse: line {line}: {message}", "你的文件无法解析：第 {line} 行：{message}"),
    "vet.and_more": (" (and {n} more)", "（还有 {n} 处）"),
    "vet.nothing": ("nothing", "什么也没有"),
    "vet.missing": ("your file defines no `{name}`; it defines: {listed}. Keep the names from the stub "
                    "(attn-drill new {id} --dir /tmp shows them)",
                    "你的文件没有定义 `{name}`；它定义了：{listed}。请保留模板中的名字（attn-drill new {id} --dir /tmp "
                    "可以查看）"),
    "vet.forbidden": ("uses `{name}`, which this problem forbids: write it by hand", "使用了本题禁止的 `{name}`：请手写实现"),

    # ------------------------------------------------------------ what graded code may not use
    "policy.import": ("`import {module}`: graded code may import only torch, math, numpy and a few standard modules "
                      "(not {top})", "`import {module}`：评测代码只能导入 torch、math、numpy 和少数标准库模块（不能导入 {top}）"),
    "policy.private_module": ("`{module}` is a private module; use torch's public API",
                              "`{module}` 是私有模块；请使用 torch 的公开 API"),
    "policy.library_store": ("`{what}` is a library's own attribute: graded code may not replace or delete it "
                             "(what other code calls would become yours)",
                             "`{what}` 是库自己的属性：评测代码不能替换或删除它（否则别的代码调用的就成了你的代码）"),
    "policy.wraps_names": ("functools.wraps only with the function it wraps: `assigned` and `updated` copy attributes "
                           "named in strings", "functools.wraps 只能传入被包装的函数：`assigned` 和 `updated` 会按字符串"
                                               "中的名字复制属性"),
    "policy.outside": ("`{what}` reaches outside what graded code may use", "`{what}` 超出了评测代码可以使用的范围"),
    "policy.star": ("`from {module} import *` is not allowed in graded code", "评测代码中不允许 `from {module} import *`"),
    "policy.only": ("`{what}`: graded code may use only {allowed} from {module}",
                    "`{what}`：评测代码只能使用 {module} 中的 {allowed}"),
    "policy.private_name": ("`{what}`: a private name; use the public API", "`{what}`：这是私有名字；请使用公开 API"),
    "policy.dunder": ("`.{attr}`: graded code may not use interpreter internals", "`.{attr}`：评测代码不能使用解释器内部机制"),
    "policy.private_attr": ("`.{attr}` is private to another object; graded code may use private names only on self "
                            "and its own classes", "`.{attr}` 是其他对象的私有属性；评测代码只能在 self 和自己定义的类上使用私有名字"),
    "policy.denied_name": ("`{name}` is not allowed in graded code (no dynamic code or namespaces)",
                           "评测代码中不允许使用 `{name}`（不能动态执行代码或操作命名空间）"),
    "policy.module_value": ("`{name}` is a module: graded code uses it only as `{name}.<attribute>` (or binds it to "
                            "another plain name), never passes, stores or returns it",
                            "`{name}` 是一个模块：评测代码只能以 `{name}.<属性>` 的形式使用它（或把它赋给另一个普通名字），"
                            "不能把它传递、存储或返回"),
    "policy.only_attribute": ("`{name}` may be used only as `{name}.<attribute>` in graded code",
                              "评测代码中 `{name}` 只能以 `{name}.<属性>` 的形式使用"),
    "policy.literal_attr": ("`{name}` may be used only in a call with a literal attribute name",
                            "`{name}` 只能在属性名为字面量的调用中使用"),
    "policy.reserved": ("`{name}` is a name the grader uses; choose another name",
                        "`{name}` 是评测器使用的名字；请换一个名字"),
    "policy.computed_attr": ("`{name}` with a computed attribute name is allowed only on self; write the attribute out",
                             "属性名是计算得到的 `{name}` 只允许用在 self 上；请直接写出属性名"),
    "policy.match_positional": ("a class pattern with positional parts (`case C(x)`) reads attributes named by "
                                "strings (`__match_args__`); write `case C(attr=x)` or an isinstance test",
                                "带位置参数的类模式（`case C(x)`）按字符串（`__match_args__`）读取属性；"
                                "请写成 `case C(attr=x)` 或用 isinstance 判断"),
    "policy.metaclass": ("graded code may not make metaclasses or classes from strings (`type(name, bases, dict)`): "
                         "they decide what isinstance() and class patterns believe",
                         "被评测的代码不能定义元类，也不能用字符串构造类（`type(name, bases, dict)`）："
                         "它们会左右 isinstance() 与类模式的判断"),
    "policy.too_deep": ("this file is nested too deeply to be checked (an expression or block thousands of levels "
                        "deep); write it flat",
                        "这个文件嵌套得太深，无法检查（某个表达式或代码块嵌套了成千上万层）；请写得扁平一些"),
    "policy.helper_package": ("`{name}` is a folder: graded code may import helper files beside it ({name}.py), not "
                              "packages", "`{name}` 是一个文件夹：评测代码只能导入同目录下的辅助文件（{name}.py），不能导入包"),
    "policy.helper_link": ("`{name}` is a symbolic link: a helper file must be a file of its own",
                           "`{name}` 是符号链接：辅助文件必须是一个真实的文件"),
    "policy.helper_unreadable": ("`{name}` cannot be read as UTF-8 text", "无法以 UTF-8 文本读取 `{name}`"),
    "policy.denied_def": ("defining `{name}` is not allowed in graded code: it changes how torch or Python dispatch",
                          "评测代码中不允许定义 `{name}`：它会改变 torch 或 Python 的分派方式"),

    # ------------------------------------------------------------ check
    "check.is_folder": ("{file} is a folder; give the file to grade, e.g. {example}",
                        "{file} 是一个文件夹；请给出要评测的文件，例如 {example}"),
    "check.not_regular": ("{file} is not a regular file (a device, a pipe or a socket); give a .py file to grade",
                          "{file} 不是普通文件（而是设备、管道或套接字）；请给出要评测的 .py 文件"),
    "check.no_file": ("{file} does not exist; create it with: attn-drill new {id}",
                      "{file} 不存在；可以这样创建：attn-drill new {id}"),
    "check.total": ("{passed} of {total} problems pass", "{total} 道题中 {passed} 道通过"),
    "check.next": ("next:", "下一题："),
    "check.drill_done": ("re-drill of {id} passed (rated {rating}); the next one is due on {date}: attn-drill today", "{id} 的重练通过（评为{rating}）；下一次在 {date}：attn-drill today"),
    "check.scheduled": ("{id} is in your re-drills now (rated {rating}): redo it from memory on {date}; attn-drill today lists what is due", "{id} 已加入重练（评为{rating}）：请在 {date} 凭记忆重做；attn-drill today 会列出到期的内容"),

    # ------------------------------------------------------------ list and show
    "list.heading": ("attn-drill problems ({n})", "attn-drill 题库（共 {n} 道）"),
    "list.id": ("id", "id"),
    "list.title": ("title", "题目"),
    "list.level": ("level", "难度"),
    "list.kind": ("kind", "类型"),
    "list.tags": ("tags", "标签"),
    "list.minutes": ("min", "分钟"),
    "list.status": ("status", "状态"),
    "list.none": ("No problem matches those filters.", "没有符合这些条件的题目。"),
    "list.no_tag": ("no problem has the tag '{tag}'", "没有题目带有标签 '{tag}'"),
    "list.near": ("; did you mean: {tags}?", "；你是不是想找：{tags}？"),
    "level.easy": ("easy", "简单"),
    "level.medium": ("medium", "中等"),
    "level.hard": ("hard", "困难"),
    "status.passed": ("passed", "已通过"),
    "status.failing": ("failing", "未通过"),
    "status.not_started": ("not started", "未开始"),
    "unit.min": ("min", "分钟"),
    "show.interface": ("Interface: {names}", "接口：{names}"),
    "show.forbidden": ("Forbidden: {names}", "禁止使用：{names}"),
    "show.required": ("Required: {names}", "必须使用：{names}"),
    "show.next": ("{n} hints: attn-drill hint {id}   ·   start: attn-drill new {id}",
                  "{n} 条提示：attn-drill hint {id}   ·   开始：attn-drill new {id}"),
    "show.heading": ("{id}: {title}  [{level}, ~{minutes} min, {tags}]", "{id}：{title}（{level}，约 {minutes} 分钟，{tags}）"),

    # ------------------------------------------------------------ the command line
    "cli.bug": ("the tool itself failed (not your code; please report this, with ATTN_DRILL_DEBUG=1 for the "
                "traceback): {error}", "工具自身出错了（不是你的代码的问题；请报告此问题，设置 ATTN_DRILL_DEBUG=1 可看到"
                "调用栈）：{error}"),

    "cli.error": ("error:", "错误："),
    "cli.warning": ("warning:", "警告："),
    "cli.bad_spec": ("bad problem spec: {error}", "题目说明文件有误：{error}"),
    "cli.tool_error": ("the grader itself failed (not your code); please report this:\n{error}",
                       "评测器自身出错了（不是你的代码的问题）；请报告此问题：\n{error}"),
    "cli.os_error": ("cannot go on: {error}", "无法继续：{error}"),
    "cli.interrupted": ("interrupted", "已中断"),

    # ------------------------------------------------------------ watch
    "watch.watching": ("watching", "正在监视"),
    "watch.check_no": ("check #{n} at {at}", "第 {n} 次检查，{at}"),
    "watch.checking_short": ("checking…", "检查中…"),
    "watch.checking": ("checking {files}…", "正在检查 {files}…"),
    "watch.elapsed": ("{s} s (limit {limit} s)", "已用 {s} 秒（上限 {limit} 秒）"),
    "watch.previous": ("(below: the report of the previous save)", "（下面是上一次保存的报告）"),
    "watch.keys": ("save to re-check · d details · r re-check · q quit", "保存即重新检查 · d 详情 · r 重新检查 · q 退出"),
    "watch.not_checked": ("not checked yet", "尚未检查"),
    "watch.waiting": ("waiting for {file} to be saved", "等待保存 {file}"),
    "watch.no_files": ("no problem file here yet: create one with attn-drill new <id>",
                       "这里还没有题目文件：用 attn-drill new <id> 创建一个"),
    "watch.more_below": ("… (more with d, or attn-drill check --verbose)", "…（按 d 或运行 attn-drill check --verbose 查看更多）"),
    "watch.tool_error": ("the grader itself failed ({error}); still watching, save again to retry",
                         "评测器自身出错了（{error}）；仍在监视，再次保存即可重试"),
    "watch.stopped.one": ("stopped watching after 1 check", "已停止监视，共检查 1 次"),
    "watch.stopped.many": ("stopped watching after {n} checks", "已停止监视，共检查 {n} 次"),

    # ------------------------------------------------------------ mock interviews
    "mock.heading": ("mock interview {id}:", "模拟面试 {id}："),
    "mock.count.one": ("1 problem, {time}", "1 道题，{time}"),
    "mock.count.many": ("{n} problems, {time}", "{n} 道题，{time}"),
    "mock.on_clock": ("on the clock", "开始计时"),
    "mock.time_left": ("left", "剩余"),
    "mock.edit": ("Edit {files} in {folder} with your editor. Check from here (c), or in another terminal: cd {folder} && attn-drill check", "用你的编辑器修改 {folder} 中的 {files}。在这里按 c 检查，或在另一个终端中运行：cd {folder} && attn-drill check"),
    "mock.no_terminal": ("no terminal here: keys are off, the clock runs until {ends}; check in another terminal "
                         "(cd {folder} && attn-drill check); Ctrl-C pauses", "这里没有终端：按键不可用，计时到 {ends} 结束；"
                         "请在另一个终端检查（cd {folder} && attn-drill check）；Ctrl-C 暂停"),
    "mock.title": ("mock {id}", "模拟面试 {id}"),
    "mock.edit_in": ("edit the files in {folder}", "在 {folder} 中修改文件"),
    "mock.left": ("{left} left", "剩余 {left}"),
    "mock.of": ("of {total}", "/ 共 {total}"),
    "mock.problem": ("problem", "题目"),
    "mock.checks": ("checks", "检查次数"),
    "mock.hints": ("hints", "提示"),
    "mock.no_check_yet": ("not checked yet", "尚未检查"),
    "mock.green_at": ("(green at {at})", "（{at} 时通过）"),
    "mock.looks_like": ("looks like {id}: {why}", "看起来是{id}：{why}"),
    "mock.keys": ("keys: c check all · l last reports · u follow-ups · h hint · s statements · f finish now · "
                  "Ctrl-C pause", "按键：c 全部检查 · l 最近的报告 · u 追问 · h 提示 · s 题目 · f 立即结束 · Ctrl-C 暂停"),
    "mock.followups_ready": ("passed: {ids}. The interviewer has follow-up questions: press u",
                             "已通过：{ids}。面试官有追问：按 u"),
    "mock.no_followups": ("no follow-up questions now: pass a problem first (its questions are asked once)", "现在没有追问：先通过一道题（每道题的追问只问一次）"),
    "mock.followups_all_asked": ("the follow-up questions of {ids} were asked already; pass another problem for more", "{ids} 的追问已经问过了；再通过一道题就有新的追问"),
    "mock.right_of": ("{right} of {n} right", "答对 {right}/{n}"),
    "mock.followups_row": ("follow-ups: {result}", "追问：{result}"),
    "mock.back_to_clock": ("press any key to go back to the clock", "按任意键回到计时界面"),
    "mock.reviewed": ("{id}: rated {rating} in your re-drills; redo it from memory on {date}", "{id}：在重练中评为{rating}；请在 {date} 凭记忆重做"),
    "mock.at_level": ("picked at your level ({levels}; --difficulty picks another)", "按你的水平选题（{levels}；用 --difficulty 可另选）"),
    "mock.at_level_new": ("picked among {levels} problems: you have not passed one yet (--difficulty picks another)", "从{levels}题目中选题：你还没有通过任何一道题（用 --difficulty 可另选）"),
    "mock.none_fit": ("no problem at this level fits in {minutes} min: {id}, the shortest, takes about {est} min", "这个难度没有能在 {minutes} 分钟内完成的题目：最短的 {id} 也需要约 {est} 分钟"),
    "mock.fewer_fit.one": ("only 1 problem fits in {minutes} min (about {est} min), not {count}", "{minutes} 分钟内只放得下 1 道题（约 {est} 分钟），而不是 {count} 道"),
    "mock.fewer_fit.many": ("only {n} problems fit in {minutes} min (about {est} min), not {count}", "{minutes} 分钟内只放得下 {n} 道题（约 {est} 分钟），而不是 {count} 道"),
    "mock.md_title": ("Mock interview {id}", "模拟面试 {id}"),
    "mock.md_heading": ("{i}. {title} ({file}, {level}, ~{minutes} min)", "{i}. {title}（{file}，{level}，约 {minutes} 分钟）"),
    "mock.rules": ("Interface: {interface}. Forbidden: {forbidden}.", "接口：{interface}。禁止使用：{forbidden}。"),
    "mock.followups_done": ("follow-ups of {id}: {right} of {n} right", "{id} 的追问：答对 {right}/{n} 题"),
    "mock.followups_card": ("follow-ups (apart from the score): {right} of {n} right ({per})", "追问（不计入得分）：答对 {right}/{n} 题（{per}）"),
    "mock.ask_hint": ("hint for which problem? press 1-{n} (any other key cancels)", "要哪道题的提示？按 1-{n}（其他键取消）"),
    "mock.ask_finish": ("finish now and grade? press y to confirm, any other key to go on",
                        "现在结束并评分？按 y 确认，其他键继续"),
    "mock.checking": ("checking…", "检查中…"),
    "mock.not_attempted": ("not attempted", "未作答"),
    "mock.missing": ("missing", "缺失"),
    "mock.file_missing": ("{file} is missing", "{file} 不存在"),
    "mock.grader_failed": ("the grader failed (not your code): {error}", "评测器出错（不是你的代码的问题）：{error}"),
    "mock.check_failed": ("check failed: {error}", "检查失败：{error}"),
    "mock.no_report": ("no check yet: press c first", "还没有检查：先按 c"),
    "mock.all_hints": ("all {n} hints for {id} are shown already", "{id} 的 {n} 条提示已全部显示"),
    "mock.hint_counts": ("this hint counts against the mock", "这条提示会计入模拟面试的扣分"),
    "mock.paused": ("paused", "已暂停"),
    "mock.paused_left": ("{id} with {left} left. Continue with: attn-drill mock --resume", "{id}，剩余 {left}。继续：attn-drill mock --resume"),
    "mock.grading_all": ("{reason}: grading everything…", "{reason}：正在评测全部题目…"),
    "mock.time_up": ("time is up", "时间到"),
    "mock.time_was_up": ("time was already up", "时间已经用完"),
    "mock.finished_early": ("finished early", "提前结束"),
    "mock.scorecard": ("scorecard · {id}", "成绩单 · {id}"),
    "mock.result": ("result", "结果"),
    "mock.time_to_green": ("time to green", "通过用时"),
    "mock.score": ("score", "得分"),
    "mock.solution_viewed": ("(solution viewed)", "（看过答案）"),
    "mock.verdict": ("verdict:", "结论："),
    "mock.v.strong_pass": ("strong pass", "优秀"),
    "mock.v.pass": ("pass", "通过"),
    "mock.v.borderline": ("borderline", "勉强"),
    "mock.v.no_pass": ("no pass", "未通过"),
    "mock.v.running": ("running", "进行中"),
    "mock.v.paused": ("paused", "已暂停"),
    "mock.v.finished": ("finished", "已结束"),
    "mock.summary": ("{passed} of {total} passed · {hints} hints · time used {used} of {seconds} · score {score}", "通过 {passed}/{total} 道题 · 提示 {hints} 次 · 用时 {used} / {seconds} · 得分 {score}"),
    "mock.how_scored": ("How it is scored: a problem that passes at the end scores 1, less 0.25 per hint (at least "
                        "0.25); 0 if it fails or its solution was viewed. The verdict reads the mean: strong pass "
                        "≥ 0.9, pass ≥ 0.6, borderline ≥ 0.3, else no pass.",
                        "计分方式：结束时通过的题目得 1 分，每用一次提示减 0.25（最低 0.25）；未通过或看过答案得 0 分。"
                        "结论看平均分：≥ 0.9 优秀，≥ 0.6 通过，≥ 0.3 勉强，否则未通过。"),
    "mock.history": ("mock interviews", "模拟面试记录"),
    "mock.started": ("started", "开始时间"),
    "mock.mock": ("mock", "模拟面试"),
    "mock.problems": ("problems", "题目"),
    "mock.time": ("time", "用时"),
    "mock.passed": ("passed", "通过"),
    "mock.verdict_col": ("verdict", "结论"),
    "mock.none_yet": ("No mock interviews yet: attn-drill mock", "还没有模拟面试记录：attn-drill mock"),
    "mock.too_many": ("too many mock folders named {base}-* in {parent}", "{parent} 中名为 {base}-* 的模拟面试文件夹太多了"),
    "mock.unfinished": ("note: mock {id} is unfinished; continue it with: attn-drill mock --resume",
                        "提示：模拟面试 {id} 尚未结束；继续：attn-drill mock --resume"),
    "mock.folder_gone": ("the mock folder {folder} is gone; start a new one with: attn-drill mock",
                         "模拟面试文件夹 {folder} 不见了；开始新的一场：attn-drill mock"),
    "mock.no_mock_in": ("{folder} holds no mock interview", "{folder} 中没有模拟面试"),
    "mock.missing_from": ("the mock {id} is missing from {folder}", "{folder} 中找不到模拟面试 {id}"),
    "mock.already_finished": ("the mock {id} is already finished; start another: attn-drill mock",
                              "模拟面试 {id} 已经结束；开始新的一场：attn-drill mock"),
    "mock.running_elsewhere": ("the mock {id} is running in another terminal (process {pid})",
                               "模拟面试 {id} 正在另一个终端中进行（进程 {pid}）"),
    "mock.no_match": ("no problem matches those filters; see them with: attn-drill list",
                      "没有符合这些条件的题目；查看题库：attn-drill list"),
    "mock.count_min": ("--count must be at least 1", "--count 至少为 1"),
    "mock.minutes_min": ("the mock needs some time: --minutes must be more than 0", "模拟面试需要时间：--minutes 必须大于 0"),
    "mock.none_paused": ("no paused mock interview here; start one with: attn-drill mock",
                         "这里没有暂停的模拟面试；开始一场：attn-drill mock"),

    # ------------------------------------------------------------ hints, solution, reset, new
    "hint.title": ("hint {i} of {n} · {id}", "提示 {i}/{n} · {id}"),
    "hint.none_seen": ("No hints seen yet for {id}. The first one: attn-drill hint {id}",
                       "{id} 还没有看过提示。第一条：attn-drill hint {id}"),
    "hint.seen": ("{seen} of {total} hints seen", "已看 {seen}/{total} 条提示"),
    "hint.next_one": ("; the next one: attn-drill hint {id}", "；下一条：attn-drill hint {id}"),
    "hint.all_shown": ("All {n} hints for {id} are already shown (attn-drill hint {id} --all to read them again). "
                       "Still stuck? The reference: attn-drill solution {id}",
                       "{id} 的 {n} 条提示都已显示（attn-drill hint {id} --all 可以重看）。还是卡住？参考答案：attn-drill "
                       "solution {id}"),
    "hint.more.one": ("1 more hint: attn-drill hint {id}", "还有 1 条提示：attn-drill hint {id}"),
    "hint.more.many": ("{n} more hints: attn-drill hint {id}", "还有 {n} 条提示：attn-drill hint {id}"),
    "hint.last": ("that was the last hint; the reference: attn-drill solution {id}",
                  "这是最后一条提示；参考答案：attn-drill solution {id}"),
    "solution.ask": ("You have not passed {id} yet. Show the reference solution (recorded in your progress)?",
                     "你还没有通过 {id}。要显示参考答案吗（会记录在你的进度中）？"),
    "solution.refused": ("{id} is not passed yet: showing its solution needs confirmation. Run it in a terminal, or "
                         "add --yes: attn-drill solution {id} --yes", "{id} 还没有通过：显示答案需要确认。请在终端中运行，或加上 "
                         "--yes：attn-drill solution {id} --yes"),
    "solution.heading": ("reference solution: {id} ({file})", "参考答案：{id}（{file}）"),
    "solution.save": ("as a file: attn-drill solution {id} --yes > {id}_reference.py",
                      "保存为文件：attn-drill solution {id} --yes > {id}_reference.py"),
    "reset.already": ("{file} is already the untouched stub; nothing to do.", "{file} 已经是未修改的模板，无需操作。"),
    "reset.ask": ("Replace your {file} with the stub? (a backup of your file is kept)",
                  "用模板替换你的 {file} 吗？（会保留你的文件的备份）"),
    "reset.refused": ("resetting {file} needs confirmation; run it in a terminal, or add --yes: attn-drill reset {id} "
                      "--yes", "重置 {file} 需要确认；请在终端中运行，或加上 --yes：attn-drill reset {id} --yes"),
    "reset.done": ("restored the stub in {file}; grade it with: attn-drill check {id}",
                   "已在 {file} 中恢复模板；评测：attn-drill check {id}"),
    "new.no_backup": ("could not keep a backup of {file} ({why}), so it was left as it is; make the folder writable, "
                      "or move the file away yourself", "无法备份 {file}（{why}），所以没有改动它；请让文件夹可写，或自己移走这个文件"),
    "new.is_folder": ("{file} is a folder, not a file; it is left as it is. Move it away, or write the stub elsewhere: "
                      "attn-drill new {id} --dir <folder>", "{file} 是文件夹，不是文件；没有改动它。请移走它，或把模板写到别处："
                      "attn-drill new {id} --dir <文件夹>"),
    "new.parent_file": ("{folder} is a file, not a folder; choose a folder for {name}", "{folder} 是文件，不是文件夹；请为 {name} 选一个文件夹"),
    "new.no_folder": ("cannot create the folder {folder} ({why}); choose another one", "无法创建文件夹 {folder}（{why}）；请换一个"),
    "new.cannot_write": ("cannot write {file} ({why}): is the folder writable? Choose another one with --dir, or fix "
                         "its permissions", "无法写入 {file}（{why}）：文件夹可写吗？用 --dir 换一个，或修改它的权限"),
    "new.dir_file": ("--dir {folder} is a file, not a folder; give the folder to write {id}.py into",
                     "--dir {folder} 是文件，不是文件夹；请给出写入 {id}.py 的文件夹"),
    "new.exists": ("{file} already exists; your work is kept. Use --force to replace it (a backup is kept), or grade "
                   "it: attn-drill check {id}", "{file} 已存在；你的代码保持不变。用 --force 替换它（会保留备份），或评测它："
                   "attn-drill check {id}"),
    "new.wrote": ("wrote {file}. Read the task: attn-drill show {id}; grade it: attn-drill check {id}{where}",
                  "已写入 {file}。阅读题目：attn-drill show {id}；评测：attn-drill check {id}{where}"),
    "new.backup": ("kept a backup of your file: {file}", "已保留你的文件的备份：{file}"),

    # ------------------------------------------------------------ the progress file
    "state.damaged": ("progress file {file} was damaged ({why}); kept it as {kept} and started afresh (there was no last good copy to restore)", "进度文件 {file} 已损坏（{why}）；已另存为 {kept}，并重新开始记录（没有可恢复的上一份完好副本）"),
    "state.restored": ("progress file {file} was damaged ({why}); kept it as {kept} and restored its last good copy ({copy}, saved {when})", "进度文件 {file} 已损坏（{why}）；已另存为 {kept}，并恢复了上一份完好的副本（{copy}，保存于 {when}）"),
    "state.adopted": ("moved the progress kept in {file} into your progress ({home}), one for all your folders; the old file is kept as {kept}", "已把 {file} 中的进度并入你的进度（{home}，所有文件夹共用一份）；旧文件另存为 {kept}"),
    "state.damaged_stuck": ("progress file {file} is damaged ({why}) and could not be moved aside ({error}); it is "
                            "left as it is, and progress is not saved until you move it away",
                            "进度文件 {file} 已损坏（{why}），且无法移到一边（{error}）；保持原样，在你移走它之前进度不会保存"),
    "state.folder_is_file_stuck": ("{folder} is a file, not the folder attn-drill keeps progress in, and it could not "
                                   "be moved aside ({error}); progress is not read or saved here until you move it away",
                                   "{folder} 是文件，而不是 attn-drill 存放进度的文件夹，且无法移到一边（{error}）；在你移走它"
                                   "之前，这里不会读取或保存进度"),
    "state.folder_was_file": ("{folder} was a file, not the folder attn-drill keeps progress in; kept it as {kept} and "
                              "started afresh", "{folder} 是文件，而不是 attn-drill 存放进度的文件夹；已另存为 {kept}，并重新开始记录"),
    "state.no_folder": ("could not create {folder}; progress is not saved", "无法创建 {folder}；进度不会保存"),
    "state.cannot_create": ("could not save progress: cannot create {folder} ({error}); the command goes on without "
                            "saving it", "无法保存进度：不能创建 {folder}（{error}）；命令继续执行，但不保存进度"),
    "state.entries_stuck": ("progress file {file} has damaged entries ({listed}); a copy could not be kept ({error}), "
                            "so it is left as it is and progress is not saved",
                            "进度文件 {file} 有损坏的条目（{listed}）；无法保留副本（{error}），所以保持原样，进度不会保存"),
    "state.entries": ("progress file {file} had damaged entries ({listed}); kept the original as {kept} and went on "
                      "with the rest", "进度文件 {file} 有损坏的条目（{listed}）；已将原文件另存为 {kept}，其余内容照常使用"),
    "state.cannot_save": ("could not save progress in {folder} ({error}); the command goes on without saving it",
                          "无法在 {folder} 中保存进度（{error}）；命令继续执行，但不保存进度"),

    # ------------------------------------------------------------ progress
    "progress.title": ("progress", "进度"),
    "progress.checks": ("checks", "检查"),
    "progress.first_pass": ("first pass", "首次通过"),
    "progress.to_pass": ("to pass", "通过用时"),
    "progress.best": ("best", "最快"),
    "progress.hints": ("hints", "提示"),
    "progress.solution": ("sol.", "答案"),
    "progress.viewed": ("viewed", "已看"),
    "progress.solved": ("Solved", "已解决"),
    "progress.of": ("{solved} of {total}", "{solved}/{total}"),
    "progress.failing": ("{n} failing", "{n} 道未通过"),
    "progress.by_tag": ("By tag:", "按标签："),
    "progress.no_mocks": ("No mock interviews yet: attn-drill mock", "还没有模拟面试：attn-drill mock"),
    "progress.other_tags.one": ("1 other tag not started", "另有 1 个标签未开始"),
    "progress.other_tags.many": ("{n} other tags not started", "另有 {n} 个标签未开始"),
    "progress.no_tag_yet.one": ("nothing solved yet (1 tag)", "还没有解决任何题目（共 1 个标签）"),
    "progress.no_tag_yet.many": ("nothing solved yet ({n} tags)", "还没有解决任何题目（共 {n} 个标签）"),
    "progress.kept_in": ("your progress is kept in {file}, one for all your folders (to move it, move the folder and set ATTN_DRILL_HOME)", "你的进度保存在 {file}，所有文件夹共用一份（要移动它：移动这个文件夹，并设置 ATTN_DRILL_HOME）"),
    "progress.retention": ("From memory:", "凭记忆："),
    "progress.retention_counts": ("re-drills due today {due}, overdue {overdue}; passed from memory at least once: {memory} of {tracked}", "今天到期的重练 {due} 道，逾期 {overdue} 道；至少凭记忆通过过一次的：{memory}/{tracked} 道"),

    # ------------------------------------------------------------ grade
    "grade.heading": ("grading {n} of {everyone} student(s){where} on {problems} with {workers} worker(s), seed {seed}",
                      "评测 {everyone} 名学生中的 {n} 名{where}，题目 {problems}，{workers} 个并行进程，种子 {seed}"),
    "grade.shard": (", shard {i}/{n}", "，分片 {i}/{n}"),
    "grade.isolation": ("isolation:", "隔离："),
    "grade.sandboxed": ("OS sandbox (bubblewrap): no network, read-only system, only the student's copy writable "
                        "(in memory, at most 128 MiB, made afresh for each problem), private /proc and a private /tmp "
                        "counted in the memory limit, at most 256 processes, every process of a student ended before "
                        "each problem and when their grading ends",
                        "操作系统沙箱（bubblewrap）：无网络，系统只读，只有学生的副本可写（在内存中，最多 128 MiB，每道题重新生成），"
                        "私有的 /proc，私有的 /tmp 计入内存上限，最多 256 个进程；每道题之前以及评测结束时，结束该学生的所有进程"),
    "grade.not_sandboxed": ("NO OS SANDBOX ({why}), as --no-sandbox asks. Each grading is a process of its own whose "
                            "Python-level guards refuse, to the student's code, other folders, new processes, sockets "
                            "and native libraries. NOT protected: files anywhere you can write, written by native "
                            "code (torch, numpy); processes started by native code, which may outlive the grading; "
                            "reading files you can read outside the class folder; the machine's memory and CPU, "
                            "shared with everything else you run. Grade untrusted classes with bubblewrap "
                            "(apt-get install bubblewrap) or the container recipe in docs/classroom.md",
                            "没有操作系统沙箱（{why}），这是 --no-sandbox 的要求。每次评测是独立进程，其 Python 层的防护"
                            "拒绝学生代码访问其他文件夹、创建新进程、使用套接字和本地库。以下**不受保护**：本地代码（torch、"
                            "numpy）可以写入你有权写入的任何文件；本地代码启动的进程可能在评测结束后仍在运行；可以读取班级"
                            "文件夹之外你有权读取的文件；机器的内存和 CPU 与你运行的其他程序共用。评测不可信的班级时请使用 "
                            "bubblewrap（apt-get install bubblewrap）或 docs/classroom.md 中的容器方案"),
    "grade.progress": ("grading", "评测中"),
    "grade.running": ("running: {who}", "进行中：{who}"),
    "grade.student": ("student", "学生"),
    "grade.passed": ("passed", "通过"),
    "grade.title": ("attn-drill grade: {passed} of {n} pass ({rate}%), seed {seed}{where}",
                    "attn-drill grade：{n} 份中 {passed} 份通过（{rate}%），种子 {seed}{where}"),
    "grade.wrote": ("wrote {out}/: junit{sfx}.xml, summary{sfx}.csv, results{sfx}.csv, summary{sfx}.json, "
                    "json/<student>/<problem>.json  ({s} s)", "已写入 {out}/：junit{sfx}.xml、summary{sfx}.csv、"
                    "results{sfx}.csv、summary{sfx}.json、json/<学生>/<题目>.json（{s} 秒）"),
    "grade.o.exception": ("exception", "异常"),
    "grade.o.forbidden": ("forbidden", "违规"),
    "grade.o.timeout": ("timeout", "超时"),
    "grade.o.crash": ("crash", "崩溃"),
    "grade.o.memory": ("memory", "内存"),
    "grade.o.missing": ("missing", "未提交"),
    "grade.o.tool_error": ("tool-error", "工具错误"),
    "grade.bad_shard": ("--shard takes i/n with 1 <= i <= n, e.g. --shard 2/4; got '{text}'",
                        "--shard 的格式是 i/n，且 1 <= i <= n，例如 --shard 2/4；收到的是 '{text}'"),
    "grade.not_folder": ("{root} is not a folder; give the folder that holds one folder per student",
                         "{root} 不是文件夹；请给出每个学生一个子文件夹的那个文件夹"),
    "grade.no_files": ("no student folder in {root} holds a problem file (<id>.py, e.g. mhsa.py); name the problems "
                       "with --problems", "{root} 中没有学生文件夹包含题目文件（<id>.py，例如 mhsa.py）；请用 --problems 指定题目"),
    "grade.missing": ("no {id}.py in {student}/", "{student}/ 中没有 {id}.py"),
    "grade.missing_detail": ("no {id}.py was handed in (looked in {where})", "没有提交 {id}.py（查找位置：{where}）"),
    "grade.tool_error": ("the grader itself failed on this file (not the student's fault): {error}",
                         "评测器在这个文件上出错了（不是学生的问题）：{error}"),
    "grade.changed": ("{student}/ changed while it was graded (not by attn-drill: the grader works on a copy); grade it "
                      "again", "{student}/ 在评测期间被修改了（不是 attn-drill 改的：评测使用副本）；请重新评测"),
    "grade.shard_seed": ("with --shard, give --seed too, so every shard grades with the same cases (e.g. --seed "
                         "${{{{ github.run_number }}}})", "使用 --shard 时也要给出 --seed，让每个分片用相同的用例评测（例如 "
                         "--seed ${{{{ github.run_number }}}}）"),
    "grade.time_limit": ("--time-limit must be a positive number of seconds", "--time-limit 必须是正的秒数"),
    "grade.workers": ("--workers must be at least 1", "--workers 至少为 1"),
    "grade.fail_under": ("--fail-under is a percentage between 0 and 100", "--fail-under 是 0 到 100 之间的百分比"),
    "grade.no_students": ("{root} holds no student folders; the layout is {name}/<student>/<id>.py",
                          "{root} 中没有学生文件夹；目录结构应为 {name}/<学生>/<id>.py"),
    "grade.require_sandbox": ("no OS sandbox can be made here ({why}), so the students' code would run with "
                              "Python-level guards only; refusing to grade. Install bubblewrap (apt-get install "
                              "bubblewrap), or pass --no-sandbox to grade anyway (it says what is not protected)",
                              "这里无法创建操作系统沙箱（{why}），学生的代码只会受到 Python 层的防护；拒绝评测。请安装 "
                              "bubblewrap（apt-get install bubblewrap），或加上 --no-sandbox 仍然评测（它会说明哪些方面不受保护）"),
    "grade.skipped_link": ("{file} is a symbolic link: not graded (hand in the file itself)",
                           "{file} 是符号链接：未评测（请提交文件本身）"),
    "grade.skipped_size": ("{file} is larger than {mib} MiB: not graded", "{file} 大于 {mib} MiB：未评测"),
    "grade.skipped_unreadable": ("{file} cannot be read (not a regular file, or no permission): not graded",
                                 "无法读取 {file}（不是普通文件，或没有权限）：未评测"),
    "grade.tool_errors": ("the grader itself failed on {n} file(s); see the tool-error cells. Please report this.",
                          "评测器在 {n} 个文件上出错了；见 tool-error 单元格。请报告此问题。"),
    "grade.under": ("pass rate {rate}% is under --fail-under {limit}%", "通过率 {rate}% 低于 --fail-under {limit}%"),
    "grade.skipped": ("{n} case(s) not run on this machine (e.g. {reason}): a pass here does not cover them",
                      "{n} 个用例没有在这台机器上运行（例如 {reason}）：这里的通过不包括它们"),
    "grade.interrupted": ("interrupted: {done} of {n} grades finished and written to {out}/ (marked interrupted); continue with: {command}", "已中断：{n} 份中有 {done} 份评测完成，已写入 {out}/（标记为中断）；继续评测：{command}"),
    "grade.nothing_to_resume": ("no interrupted grading to resume in {out}/ (its journal, .grade-journal.jsonl, is not there); give the same --out as the interrupted run", "{out}/ 中没有可以继续的中断评测（找不到记录文件 .grade-journal.jsonl）；请给出与中断时相同的 --out"),
    "grade.resume_differs": ("--resume continues the grading in {out}/ with its own options; these differ: {options}", "--resume 会沿用 {out}/ 中那次评测的选项；以下选项不一致：{options}"),
    "grade.resume_changed": ("{student}/ changed since it was graded: graded again", "{student}/ 在评测之后被修改过：重新评测"),
    "grade.restarted": ("an interrupted grading in {out}/ is started over (to continue it instead: --resume)", "{out}/ 中有一次中断的评测，现在重新开始（要接着评测：--resume）"),
    "grade.resuming": ("resuming: {done} of {n} grades were finished before", "继续评测：{n} 份中已有 {done} 份完成"),

    # ------------------------------------------------------------ verify
    "verify.row": ("{reference} · stub {stub} · {caught}/{total} mutants · {questions} questions · {s} s",
                   "参考实现{reference} · 模板{stub} · 变异体 {caught}/{total} · 追问 {questions} · {s} 秒"),
    "verify.stub.fails": ("fails", "不通过"),
    "verify.stub.PASSES": ("PASSES", "竟然通过"),
    "verify.total": ("{ok} of {n} problems verified  {caught}/{mutants} mutants caught  {s} s  seed {seed}", "{n} 道题中 {ok} 道验证通过 · 捕获变异体 {caught}/{mutants} · {s} 秒 · 种子 {seed}"),

    # ------------------------------------------------------------ bench
    "bench.title": ("bench {id}  {dtype} on {device} ({threads} threads)  {shapes}", "bench {id}：{dtype}，{device}（{threads} 个线程），{shapes}"),
    "bench.median": ("median", "中位数"),
    "bench.ratio": ("yours ÷ this", "你的 ÷ 此项"),
    "bench.largest": ("largest tensor", "最大张量"),
    "bench.yours": ("yours", "你的"),
    "bench.reference": ("reference", "参考实现"),
    "bench.sdpa": ("SDPA core", "SDPA 核心"),
    "bench.cuda_peak": ("CUDA peak {bytes}", "CUDA 峰值 {bytes}"),
    "bench.caption": ("sizes from {sizes}; {runs} timed runs after {warmup} warm-ups, stopped on {stopped}; every run's "
                      "output re-checked (worst relative error {err})", "尺寸来自 {sizes}；预热 {warmup} 次后计时 {runs} 次，"
                      "因 {stopped} 停止；每次运行的输出都重新检查过（最大相对误差 {err}）"),
    "bench.smaller": ("your largest intermediate is {x}× smaller than the reference's", "你的最大中间张量比参考实现的小 {x} 倍"),
    "bench.no_sdpa": ("no SDPA column: no attention core (softmax between two matmuls) was found in the reference; add "
                      "settings.bench.sdpa to the spec to compare", "没有 SDPA 列：参考实现中没有找到注意力核心（两次矩阵乘之间的 "
                      "softmax）；可在题目说明中添加 settings.bench.sdpa 来比较"),
    "bench.cpu": ("CPU timings; on a GPU (--device cuda) runs are timed with CUDA events",
                  "CPU 计时；在 GPU 上（--device cuda）用 CUDA 事件计时"),
    "bench.measuring": ("timing yours, the reference and torch's SDPA (up to about {s} s)…",
                        "正在计时你的实现、参考实现和 torch 的 SDPA（最多约 {s} 秒）…"),
    "bench.crashed": ("your code crashed the timing process (exit code {code}); os._exit, a segfault, or running out "
                      "of memory?", "你的代码让计时进程崩溃了（退出码 {code}）；是 os._exit、段错误，还是内存不足？"),
    "bench.cannot": ("cannot time this solution:", "无法为这个解答计时："),

    # ------------------------------------------------------------ re-drills, today, plan, quiz
    "drill.started": ("re-drill {id} from memory: wrote {file} (a fresh stub; your earlier solution stays where it is). Aim for ~{minutes} min, no hints. Grade it with: attn-drill check {id} {file}", "凭记忆重练 {id}：已写入 {file}（全新的模板；你以前的解答保持原样）。目标约 {minutes} 分钟，不看提示。评测：attn-drill check {id} {file}"),
    "drill.already_open": ("a re-drill of {id} is open: {file}. Grade it with attn-drill check {id} {file}, or give "
                           "it up with attn-drill drill {id} --give-up", "{id} 有一个进行中的重练：{file}。评测："
                           "attn-drill check {id} {file}；放弃：attn-drill drill {id} --give-up"),
    "drill.none_open": ("no re-drill of {id} is open; start one with: attn-drill drill {id}",
                        "{id} 没有进行中的重练；开始一次：attn-drill drill {id}"),
    "drill.given_up": ("gave up the re-drill of {id}: it comes back soon (rated {rating})", "已放弃 {id} 的重练：它很快会再次出现（评为{rating}）"),
    "today.heading": ("today, {date}: about {minutes} min", "今天（{date}）：约 {minutes} 分钟"),
    "today.kind.open": ("continue", "继续"),
    "today.kind.redrill": ("re-drill", "重练"),
    "today.kind.quiz": ("quiz", "问答"),
    "today.kind.new": ("new", "新题"),
    "today.questions.one": ("1 follow-up question", "1 道追问"),
    "today.questions.many": ("{n} follow-up questions", "{n} 道追问"),
    "today.overdue": ("(overdue by {n} day(s))", "（已逾期 {n} 天）"),
    "today.per_problem": (" ({counts})", "（{counts}）"),
    "today.minutes": ("~{n} min", "约 {n} 分钟"),
    "today.nothing": ("nothing due today: every re-drill is scheduled later and no new problem is waiting",
                      "今天没有到期的内容：所有重练都安排在以后，也没有待做的新题"),
    "today.next_due": ("next re-drill: {id} on {date}", "下一次重练：{id}，{date}"),
    "today.how": ("Re-drills are scheduled by FSRS from how each solve went: failed or solution viewed → {again}; slower than the estimate or with hints → {hard}; within the estimate → {good}; in half of it, no hints, first check → {easy}. A study plan: attn-drill plan --days 14", "重练由 FSRS 根据每次解题的情况安排：未通过或看过答案 → {again}；比预估慢或用了提示 → {hard}；在预估时间内 → {good}；用时不到一半、无提示、第一次检查就通过 → {easy}。学习计划：attn-drill plan --days 14"),
    "plan.title": ("study plan: {days} days, {hours} h a day", "学习计划：{days} 天，每天 {hours} 小时"),
    "plan.day": ("day", "天"),
    "plan.date": ("date", "日期"),
    "plan.work": ("what to do", "内容"),
    "plan.free": ("free (nothing due)", "空闲（没有到期内容）"),
    "plan.new": ("new {id}", "新题 {id}"),
    "plan.redrill": ("re-drill {id}", "重练 {id}"),
    "plan.quiz.one": ("quiz: 1 question", "问答：1 道题"),
    "plan.quiz.many": ("quiz: {n} questions", "问答：{n} 道题"),
    "plan.day_heading": ("Day {day} ({date}, ~{minutes} min)", "第 {day} 天（{date}，约 {minutes} 分钟）"),
    "plan.left": ("{n} problem(s) do not fit in this plan: {ids}", "有 {n} 道题放不进这个计划：{ids}"),
    "plan.md_item": ("{what} (~{minutes} min): `{command}`", "{what}（约 {minutes} 分钟）：`{command}`"),
    "plan.how": ("Each day: the re-drills due, then the follow-up questions due, then new problems in curriculum "
                 "order (prerequisites first), within the day's time; reviews are projected as if each item went "
                 "well. The same progress gives the same plan.", "每天：先做到期的重练，再做到期的追问，然后按课程顺序"
                 "（先修题在前）做新题，不超过当天的时间；复习日期按每项都顺利完成来推算。同样的进度得到同样的计划。"),
    "plan.days": ("--days must be between 1 and 366", "--days 必须在 1 到 366 之间"),
    "plan.hours": ("--hours-per-day must be more than 0 and at most 16", "--hours-per-day 必须大于 0 且不超过 16"),
    "quiz.progress": ("question {i} of {n}", "第 {i}/{n} 题"),
    "quiz.title": ("follow-up · {id}", "追问 · {id}"),
    "quiz.keys": ("1-9 or ↑/↓ and Enter to answer, s to skip", "按 1-9，或 ↑/↓ 加回车作答，s 跳过"),
    "quiz.your_number": ("your answer:", "你的答案："),
    "quiz.number_hint": ("a number or an expression as on paper (16*(64*64+64)*4, 2**38, 260 KiB); Enter skips", "一个数或像在纸上那样的算式（16*(64*64+64)*4、2**38、260 KiB）；直接回车跳过"),
    "quiz.right": ("right.", "正确。"),
    "quiz.wrong": ("not quite. ", "不对。"),
    "quiz.skipped": ("skipped. ", "已跳过。"),
    "quiz.answer": ("The answer: {answer}", "答案：{answer}"),
    "quiz.you_said": ("you said {got}. ", "你的答案是 {got}。"),
    "quiz.unreadable": ("could not read '{text}' as a number: write it as on paper, e.g. 266240, 266,240, 16*(64*64+64)*4, 2**38, 260 KiB (or s to skip)", "无法把“{text}”读成一个数：请像在纸上那样写，例如 266240、266,240、16*(64*64+64)*4、2**38、260 KiB（或输入 s 跳过）"),
    "quiz.not_a_choice": ("'{text}' is not one of the choices (1-{n} or a-{last}): this question is not rated", "“{text}”不是任何一个选项（1-{n} 或 a-{last}）：这道题不计分"),
    "quiz.not_rated.one": ("(1 answer could not be read: not rated)", "（有 1 个回答无法读取：不计分）"),
    "quiz.not_rated.many": ("({n} answers could not be read: not rated)", "（有 {n} 个回答无法读取：不计分）"),
    "quiz.see": ("see {where}", "参见 {where}"),
    "quiz.statement": ("the statement (attn-drill show {id})", "题目描述（attn-drill show {id}）"),
    "quiz.summary": ("{right} of {n} right; each answer reschedules its question (wrong: it comes back soon)", "答对 {right}/{n} 题；每个回答都会重新安排这道题（答错的很快会再出现）"),
    "quiz.count": ("--count must be at least 1", "--count 至少为 1"),
    "quiz.no_terminal": ("quiz asks in a terminal; without one, give the answers: attn-drill quiz mhsa --answers 2,2,274877906944,2**32", "quiz 需要在终端中提问；没有终端时请给出答案：attn-drill quiz mhsa --answers 2,2,274877906944,2**32"),
    "quiz.nothing": ("no questions of {id} to ask now", "{id} 现在没有要问的题"),
    "quiz.nothing_all": ("no follow-up question is due, and every question of the problems you passed was asked; "
                         "pass a problem, or ask one anyway: attn-drill quiz mhsa", "没有到期的追问，已通过题目的追问也都问过了；"
                         "先通过一道题，或直接指定：attn-drill quiz mhsa"),

    # ------------------------------------------------------------ config
    "config.line": ("{key} = {value}   ({where})", "{key} = {value}   （来自 {where}）"),
    "config.default": ("default", "默认"),
    "config.unknown": ("no setting called '{key}'; the settings are: {keys}", "没有名为 '{key}' 的设置；可用的设置：{keys}"),
    "config.bad_value": ("{key} must be one of {allowed}, not '{value}'", "{key} 只能是 {allowed} 之一，不能是 '{value}'"),
    "config.saved": ("{key} = {value}, saved in {path}", "{key} = {value}，已保存到 {path}"),

    # ------------------------------------------------------------ tables
    "table.case": ("case", "用例"),
    "table.inputs": ("inputs", "输入"),
    "table.dtype": ("dtype", "dtype"),
    "table.notes": ("notes", "说明"),
    "table.result": ("result", "结果"),
    "table.error": ("error ≤ allowed", "误差 ≤ 允许"),
    "table.index": ("index", "索引"),
    "table.got": ("got", "实际"),
    "table.expected": ("expected", "期望"),
    "table.diff": ("diff", "差值"),

    # ------------------------------------------------------------ other forms of a report: lines, HTML, notebooks
    "check.two_formats": ("--json is --format json; give one of them (got --json and --format {fmt})",
                          "--json 就是 --format json；两者只给一个（收到了 --json 和 --format {fmt}）"),
    "lines.cases": (" (in {k} of {n} cases; first {case})", "（{n} 个用例中的 {k} 个；第一个是 {case}）"),
    "html.wrote": ("HTML report: {path}", "HTML 报告：{path}"),
    "html.check_title": ("attn-drill check: {ids}", "attn-drill 评测：{ids}"),
    "html.cases": ("Cases: {passed} of {n} passed", "用例：{n} 个中 {passed} 个通过"),
    "html.error_title": ("Where the error is", "误差在哪里"),
    "html.error_map": ("error of `{tensor}`{lead} against what is allowed, over ({rows_axis} ↓, {cols_axis} →), "
                       "{rows}×{cols}{pooled}", "`{tensor}` 的误差与允许值之比{lead}，({rows_axis} ↓，{cols_axis} →)，"
                       "{rows}×{cols}{pooled}"),
    "html.error_alt": ("heatmap of the error against what is allowed", "误差与允许值之比的热力图"),
    "html.within": ("within tolerance", "在容差内"),
    "html.times": ("up to {n}× the tolerance", "不超过容差的 {n} 倍"),
    "html.more": ("more than {n}", "超过 {n}"),
    "html.weights_title": ("Attention weights: yours and the reference's", "注意力权重：你的与参考实现的"),
    "html.weights": ("the first softmax of each side{lead}, over (query ↓, key →), {rows}×{cols}{pooled}",
                     "两边各自的第一个 softmax{lead}，(query ↓，key →)，{rows}×{cols}{pooled}"),
    "html.yours": ("yours", "你的"),
    "html.reference": ("reference", "参考实现"),
    "html.difference": ("|yours − reference|", "|你的 − 参考|"),
    "html.equal": ("equal", "相等"),
    "html.up_to": ("up to {n}", "不超过 {n}"),
    "html.footer": ("written by attn-drill; no script, nothing fetched", "由 attn-drill 生成；不含脚本，不联网"),
    "html.wrong_most": ("What the class got wrong most", "全班最常见的错误"),
    "html.passed_of": ("{passed} of {n} pass", "{n} 人中 {passed} 人通过"),
    "html.none_wrong": ("everyone passed", "全部通过"),
    "html.reports": ("Every student's report", "每位学生的报告"),
    "html.cell_title": ("{student} · {id}", "{student}：{id}"),
    "html.back": ("↑ the class", "↑ 回到全班"),
    "nb.this_cell": ("this cell", "本单元格"),
    "nb.new": ("the stub of {id} is in the next cell, under %%check {id}: fill it in and run the cell",
               "{id} 的代码框架已放在下一个单元格（首行为 %%check {id}）：补全后运行该单元格"),
    "nb.next": ("next: %attn_drill new {id}", "下一题：%attn_drill new {id}"),
    "nb.interrupted": ("interrupted: nothing graded; run the cell again to grade it",
                       "已中断：没有评测；再次运行该单元格即可评测"),
    "nb.not_recorded": ("this attempt is not in your progress: {why}", "这次尝试没有记入进度：{why}"),
    "nb.usage": ("usage: %attn_drill new <id> (the stub in the next cell) or %attn_drill show <id> (the statement); "
                 "grade a cell with %%check <id> on its first line",
                 "用法：%attn_drill new <id>（代码框架放进下一个单元格）或 %attn_drill show <id>（题目）；"
                 "在单元格首行写 %%check <id> 即可评测"),
}
