import { arrayConcat, arrayContainment } from './arrays.js';
import { regCast, regConcat, regNameAsText, regTargets, textConcat } from './casts.js';
import { catalogColumn, catalogFunction, catalogRelation, partitionAncestors, valueFunction, vectorResults, vectorText } from './catalog-refs.js';
import { addUniqueConstraint, alterTableKeys, createTableKeys, indexMethod, varcharLengths } from './ddl.js';
import { defaultedArguments, renamedFunction, substringCall, toCharCall } from './functions.js';
import { arrowOperands, binaryNumberText, jsonAggregate, jsonbOperator, jsonValueArguments } from './jsonb.js';
import { columnDefinition, insertColumns, quoteKeywordParts, updateTargets } from './keywords.js';
import { arrayLiteralCast, booleanCast, byteaLiteral, insertValues, intervalCast, spacedComparison, timestampCast, updateValues } from './literals.js';
import { jsonBuilder, jsonTextAggregate } from './json-builders.js';
import { callNullArguments, operatorNullOperands, subscriptNullArray, unfoldedCast, unfoldedPath } from './null-constants.js';
import { checkedCast, concatArguments, exactNumericConstant, numericLiteralCast, numericTextCast, textCast } from './numeric.js';
import { anyList, arraySubscript, collate, likePattern, operatorSpelling } from './operators.js';
import { distinctOnOrder, emptySelectList, lockingClause, overriding, sequenceRelation } from './queries.js';
import { aggregateResult, datePartCall, division, integerCall, minus, widenedBranches } from './result-types.js';
import { fromFunction, jsonSetFunction, setReturningTargets } from './set-functions.js';
import { typeName, untypedLiteralType } from './types.js';
import type { Rules } from './walker.js';

/**
 * Which rules each parse-tree node is given, in order. The order is part of
 * the output: edits at one position are applied in the order they were made,
 * and a rule that returns true ends its node's rewrites (to_char's, json_agg's
 * and a renamed function's call; the operator rules of LIKE, ANY, jsonb,
 * minus and division before OPERATOR(...)'s spelling).
 */
export const RULES: Rules = {
  results: [vectorResults, distinctOnOrder, textConcat],
  relations: [catalogRelation],
  typeNames: [typeName],
  nodes: {
    FuncCall: [
      callNullArguments,
      untypedLiteralType,
      concatArguments,
      substringCall,
      toCharCall,
      integerCall,
      datePartCall,
      aggregateResult,
      jsonBuilder,
      jsonTextAggregate,
      jsonValueArguments,
      defaultedArguments,
      jsonAggregate,
      renamedFunction,
      catalogFunction,
    ],
    ColumnRef: [catalogColumn, quoteKeywordParts],
    ColumnDef: [columnDefinition],
    CreateStmt: [varcharLengths, createTableKeys],
    SubLink: [emptySelectList],
    CaseExpr: [widenedBranches],
    CoalesceExpr: [widenedBranches],
    MinMaxExpr: [widenedBranches],
    A_Expr: [
      unfoldedPath,
      operatorNullOperands,
      widenedBranches,
      likePattern,
      anyList,
      arrowOperands,
      arrayContainment,
      jsonbOperator,
      regConcat,
      arrayConcat,
      minus,
      division,
      spacedComparison,
      operatorSpelling,
    ],
    CollateClause: [collate],
    A_Indices: [arraySubscript],
    A_Indirection: [subscriptNullArray],
    TypeCast: [
      unfoldedCast,
      binaryNumberText,
      numericLiteralCast,
      numericTextCast,
      textCast,
      checkedCast,
      arrayLiteralCast,
      vectorText,
      byteaLiteral,
      booleanCast,
      timestampCast,
      intervalCast,
      regNameAsText,
      regCast,
    ],
    RangeFunction: [jsonSetFunction, partitionAncestors, fromFunction],
    A_Const: [exactNumericConstant],
    SQLValueFunction: [valueFunction],
    InsertStmt: [overriding, insertValues, insertColumns],
    UpdateStmt: [updateValues, updateTargets],
    IndexStmt: [indexMethod],
    AlterTableStmt: [addUniqueConstraint, alterTableKeys],
    SelectStmt: [lockingClause, setReturningTargets, sequenceRelation, regTargets],
  },
};
