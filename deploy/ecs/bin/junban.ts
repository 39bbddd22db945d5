// The CDK app: `npm run synth` writes the CloudFormation template to cdk.out/ offline;
// `npx cdk deploy` (aws-cdk CLI) deploys it. Settings come from cdk.json's context or
// `-c key=value` (CDK_CONTEXT_JSON when run by `node` alone).
import { App } from 'aws-cdk-lib';
import { JunbanStack, settingsFrom } from '../lib/junban-stack';

// A template CloudFormation would refuse fails the synth instead of warning.
const app = new App({ context: { '@aws-cdk/core:validateAgainstDefaultRules': true } });
new JunbanStack(app, 'Junban', settingsFrom(app.node));
app.synth();
